"""What ``check`` and ``probe`` report, on either medium: a ``Problem`` (code, where, what, the fix,
repaired?) that folder/check.py and bucket/check.py find, and a ``ProbeReport`` of the primitives a
medium must keep (folder/probe.py, bucket/probe.py); the cache tool (cli.py) prints both."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Problem:
    code: str
    path: str
    message: str
    fix: str
    repaired: bool = False

    def __str__(self) -> str:
        tag = " (repaired)" if self.repaired else ""
        return f"[{self.code}]{tag} {self.path}: {self.message}\n    fix: {self.fix}"

    def to_dict(self) -> dict:
        return asdict(self)


def print_report(problems: list, label: str) -> int:
    """What ``check`` prints (either store): every problem, then the verdict; the exit code
    (1 while a problem remains)."""
    left = [p for p in problems if not p.repaired]
    for p in problems:
        print(p)
    if not problems:
        print(f"cache '{label}': OK")
    elif not left:
        print(f"cache '{label}': repaired, OK")
    else:
        print(f"cache '{label}': {len(left)} problem(s)")
    return 1 if left else 0


@dataclass
class Check:
    name: str
    status: str          # ok | note | unsupported | unsafe | unanswered (the medium did not answer)
    detail: str = ""


@dataclass
class ProbeReport:
    root: str
    peer: str | None
    filesystem: str
    checks: list[Check] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        statuses = {c.status for c in self.checks}
        return "unanswered" if "unanswered" in statuses else "unsafe" if "unsafe" in statuses else "safe"

    def to_dict(self) -> dict:
        return {"root": self.root, "peer": self.peer, "filesystem": self.filesystem,
                "verdict": self.verdict, "checks": [asdict(c) for c in self.checks]}

    def add(self, name: str, status: str, detail: str = "") -> None:
        self.checks.append(Check(name, status, detail))
