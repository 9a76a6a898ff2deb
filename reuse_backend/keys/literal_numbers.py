"""The literal numbers of an API-format prompt: why an "INT" / "FLOAT" input's value is refused,
the pack's own inputs exactly, host nodes' as ComfyUI's prompt validation converts them."""
from __future__ import annotations

import math

from ..errors import InvalidRequestError


def _allowed(kind: str, lo, hi) -> str:
    what = "an integer" if kind == "INT" else "a number"
    if lo is not None and hi is not None:
        return f"{what} from {lo} to {hi}"
    if lo is not None:
        return f"{what} >= {lo}"
    if hi is not None:
        return f"{what} <= {hi}"
    return what


def number_problem(name: str, kind: str, value, *, minimum=None, maximum=None, exact: bool = True,
                   fix: str | None = None) -> InvalidRequestError | None:
    """Why the literal ``value`` of the ComfyUI "INT" / "FLOAT" input ``name`` is refused, or None.

    exact=True (the pack's own inputs): an INT must be a whole number (an int, or a float
    without a fraction; never a bool or text), a FLOAT a finite number (never a bool or text).
    exact=False (host nodes): converted as ComfyUI's prompt validation does (``int(v)`` /
    ``float(v)``: 1.5 -> 1, true -> 1, "3" -> 3), refused only when that fails.
    Then the converted value must lie in [minimum, maximum] (either may be None).
    The error's message is one line naming the input, the value and the allowed range;
    ``.fix`` says what to set (``fix`` replaces the default)."""
    allowed = _allowed(kind, minimum, maximum)
    fix = fix or f"set {name} to {allowed}"

    def refuse(why: str, shown=None):
        shown = repr(value) if shown is None else shown
        return InvalidRequestError(f"{name} {why}; got {shown} (allowed: {allowed})",
                                   expected=allowed, actual=shown, fix=fix,
                                   details={"input": name, "value": value if _plain(value) else repr(value)})

    conv = int if kind == "INT" else float
    if exact:
        if isinstance(value, bool):
            return refuse("must be a whole number, not true/false" if kind == "INT" else "must be a number, not true/false",
                          "true" if value else "false")
        if isinstance(value, str):
            return refuse("must be a number, not text")
        if not isinstance(value, (int, float)):
            return refuse(f"must be a number, not {type(value).__name__}", repr(value)[:80])
        if isinstance(value, float) and not math.isfinite(value):
            return refuse("must be a finite number")
        if kind == "INT" and isinstance(value, float) and not value.is_integer():
            return refuse("must be a whole number")
        v = value
    else:
        try:
            v = conv(value)
        except (TypeError, ValueError, OverflowError) as e:
            return refuse(f"cannot be converted to {kind} ({e})", repr(value)[:80])
    try:
        if minimum is not None and v < minimum:
            return refuse(f"must be >= {minimum}", repr(v))
        if maximum is not None and v > maximum:
            return refuse(f"must be <= {maximum}", repr(v))
    except TypeError:   # a schema bound that is not a number: nothing to compare
        return None
    return None


def _plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v))
