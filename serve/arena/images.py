"""The observations play shows: a level's start and goal as served, other states rendered and
kept in a cache of the recently seen ones (agents revisit states often)."""

from __future__ import annotations

from collections import OrderedDict

from engine.levels import State
from serve.games.dataset import ServedLevel, encode_image
from serve.games.episode import EpisodeRun
from serve.games.framezip import Picture

__all__ = ["ImageCache"]


class ImageCache:
    """Base64 observations of recently seen states: agents revisit states often."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._images: OrderedDict[tuple[ServedLevel, State], Picture] = OrderedDict()

    def get(self, served: ServedLevel, state: State, step: int) -> Picture:
        """The observation of ``state`` after ``step`` actions of ``served``'s episode."""
        if served.noisy:  # every step draws its own noise: no frame is ever seen twice
            return Picture(encode_image(served.frame(state, step)))
        key = (served, state)  # the level itself: several games have a level 0
        image = self._images.get(key)
        if image is None:
            image = Picture(encode_image(served.frame(state, step)))
            self._images[key] = image
            if len(self._images) > self.size:
                self._images.popitem(last=False)
        else:
            self._images.move_to_end(key)
        return image

    def picture(self, run: EpisodeRun) -> Picture:
        """The observation of an episode's current state (after its steps, for a noisy look)."""
        if run.game is None:
            return run.served.start
        return self.picture_at(run.served, run.state, run.steps)

    def picture_at(self, served: ServedLevel, state: State, steps: int) -> Picture:
        """The observation of ``state`` reached after ``steps`` steps of ``served``."""
        if state == served.level.start and (steps == 0 or not served.noisy):
            return served.start
        return self.get(served, state, steps)
