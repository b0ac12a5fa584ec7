"""A kiosk session's rules (SPEC S2.5), pure: the action budget, the idle timeout and the
maximum lifetime. Times are whatever clock the caller passes (`time.monotonic` in the
gateway, a number in tests), so every rule is decided without waiting."""

from __future__ import annotations

from dataclasses import dataclass

from sandboxes.errors import SessionRefused

# The tools that spend one action of the budget. Screenshots, start and stop are free.
COUNTED = frozenset(
    {"computer_click", "computer_type", "computer_key", "computer_scroll", "computer_navigate"}
)


@dataclass(slots=True)
class SessionClock:
    """How much of a session is left: actions, idle time, lifetime."""

    max_actions: int
    idle_timeout: int
    max_lifetime: int
    started: float
    last_action: float
    used: int = 0

    def time_left(self, now: float) -> tuple[int, int]:
        """(idle seconds left, lifetime seconds left), never negative."""
        idle = self.idle_timeout - (now - self.last_action)
        life = self.max_lifetime - (now - self.started)
        return max(0, int(idle)), max(0, int(life))

    def check_budget(self, tool: str, *, counted: bool | None = None, stop_with: str = "") -> None:
        """Refuse a counted tool once the budget is spent (before any other check, so a
        spent session says so whatever the arguments). `counted` overrides COUNTED (a rig
        verb); `stop_with` names the tool that ends it (default: computer_session_stop)."""
        if (tool in COUNTED if counted is None else counted) and self.used >= self.max_actions:
            stop = stop_with or "Stop the session (computer_session_stop)"
            raise SessionRefused(
                f"action refused: this session's {self.max_actions} actions are used up. "
                f"{stop} and start a new one if the task allows it."
            )

    def spend(self, now: float) -> None:
        """Count one action, done at `now`: it uses the budget and resets the idle timer.
        A refused action (bad URL, spent budget) is never counted."""
        self.used += 1
        self.last_action = now

    def expiry(self, now: float) -> str | None:
        """Why the session must end now (lifetime first, then idleness), or None."""
        if now - self.started >= self.max_lifetime:
            return f"it reached its {self.max_lifetime} s lifetime"
        if now - self.last_action >= self.idle_timeout:
            return f"it was idle for {self.idle_timeout} s"
        return None

    def status_line(self, now: float) -> str:
        idle, life = self.time_left(now)
        return (
            f"Actions used: {self.used}/{self.max_actions}. Time left: {life} s of the session "
            f"lifetime; it ends after {idle} s without an action."
        )
