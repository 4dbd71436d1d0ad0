"""The exceptions of synaps_scope. Each also derives from the built-in a caller would expect."""


class ScopeError(Exception):
    """Base of every error synaps_scope raises itself."""


class ScopeRequiredError(ScopeError):
    """``process_scopes = required``, and process scopes are unavailable for this launch."""


class NotOurScopeError(ScopeError, PermissionError):
    """The unit or cgroup is not a ``synaps-*.scope`` made by synaps-scope, holds the calling
    process, or belongs to another user; refused."""


class NotInScopeError(ScopeError, LookupError):
    """The process is not in the scope named."""


class ScopeNotFoundError(ScopeError, LookupError):
    """No such scope is running (it exited and was collected, or never started)."""


class ScopeTimeoutError(ScopeError, TimeoutError):
    """Processes were still in the scope at the deadline."""


class CannotWarnError(ScopeError):
    """None of the scopes given can be warned about before systemd-oomd acts: ``kind`` says why
    (``"no-oomd"``, ``"no-rule"``, ``"no-psi"``, ``"unreadable"``, ``"no-swap"``,
    ``"no-memory-controller"``, ``"scope-gone"`` or ``"cannot-ask"``), ``unit`` of which scope."""

    def __init__(self, message: str, unit: str = "", kind: str = "") -> None:
        super().__init__(message)
        self.unit = unit
        self.kind = kind
