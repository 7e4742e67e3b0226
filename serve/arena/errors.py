"""The kinds of refusal play answers with: domain errors only (``serve.web.web`` maps each kind to
its HTTP status; nothing below the web layer knows one)."""

from __future__ import annotations

from engine.errors import SokoforgeError

__all__ = ["BadRequest", "Conflict", "Forbidden", "Limited", "NotFound", "PlayError",
           "RoundClosed", "StepAhead", "Unauthorized", "Unavailable", "Unprocessable",
           "UnsupportedMedia"]


class PlayError(SokoforgeError):
    """A refused request: its class says which kind, the message says why and what to do
    (``serve.web.web`` gives each kind its HTTP status)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(PlayError):
    """A request that is malformed for play."""


class Unauthorized(PlayError):
    """A missing or unknown key."""


class Forbidden(PlayError):
    """A request the server will not take from where it came (another site's page)."""


class NotFound(PlayError):
    """Something named that does not exist (or is not the caller's)."""


class Conflict(PlayError):
    """A request that clashes with the current state (a closed scorecard, a stale action)."""


class UnsupportedMedia(PlayError):
    """A body of a media type the route does not take."""


class RoundClosed(Conflict):
    """A change on a version whose round is over: a conflict on every face (the ARC-AGI-3 face
    too, which otherwise reports a conflict as a bad request), with the reason."""


class StepAhead(Conflict):
    """A numbered step past the session's next one: a conflict on every face, with the step
    the session is at."""


class Unprocessable(PlayError):
    """A well-formed request that play cannot carry out."""


class Limited(PlayError):
    """A limit; ``retry_after`` is how many seconds until trying again makes sense."""

    def __init__(self, detail: str, retry_after: int = 60) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class Unavailable(PlayError):
    """Play cannot answer now (a session another process keeps writing)."""
