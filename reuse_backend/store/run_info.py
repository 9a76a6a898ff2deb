"""Who made a version (recorded in its manifest), and the JSON-only rule for keys, meta, sections."""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field

from ..errors import TransactionError
from .owner import hostname


@dataclass
class RunInfo:
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    host: str = field(default_factory=hostname)
    pid: int = field(default_factory=os.getpid)
    prompt_id: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"run_id": str(self.run_id), "host": str(self.host), "pid": int(self.pid),
                "prompt_id": self.prompt_id, "extra": dict(self.extra)}


def jsonable(body, what: str) -> dict:
    if type(body) is not dict:
        raise TransactionError(f"{what} must be a dict", expected="dict", actual=type(body).__name__,
                               fix="pass a plain JSON object")
    try:
        return json.loads(json.dumps(body, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise TransactionError(f"{what} is not plain JSON ({e})", expected="JSON values",
                               actual=repr(body)[:120], fix="keep keys/meta/sections JSON-only") from None
