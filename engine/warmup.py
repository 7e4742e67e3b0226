"""Compile every numba kernel once into the on-disk cache (``make test`` runs this first)."""

from __future__ import annotations


def main() -> None:
    import engine.levels  # noqa: F401  (kernels register here as modules land)


if __name__ == "__main__":
    main()
