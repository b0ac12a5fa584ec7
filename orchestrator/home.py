"""Where corral keeps its files: CORRAL_HOME (default ~/.corral)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class CorralHome:
    root: Path

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> CorralHome:
        env = os.environ if environ is None else environ
        raw = env.get("CORRAL_HOME")
        root = Path(raw).expanduser() if raw else Path.home() / ".corral"
        return cls(root=root.resolve())

    @property
    def config_file(self) -> Path:
        return self.root / "config.toml"

    @property
    def agents_dir(self) -> Path:
        return self.root / "agents"

    def agent_file(self, name: str) -> Path:
        return self.agents_dir / name / "agent.toml"

    @property
    def audit_file(self) -> Path:
        return self.root / "audit.jsonl"

    @property
    def tool_calls_file(self) -> Path:
        return self.root / "tool_calls.jsonl"

    @property
    def tokens_dir(self) -> Path:
        return self.root / "tokens"

    @property
    def operators_file(self) -> Path:
        """Operator names and the SHA-256 of each one's console token (never the token)."""
        return self.root / "operators.json"

    @property
    def slots_dir(self) -> Path:
        return self.root / "slots"

    @property
    def work_dir(self) -> Path:
        """Private per-call directories (the script mounted at /workspace) live here."""
        return self.root / "work"

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.agents_dir.mkdir(exist_ok=True, mode=0o700)
        self.work_dir.mkdir(exist_ok=True, mode=0o700)
