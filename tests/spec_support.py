"""The tiny game cut to its one- and two-crate tiers, for tests whose checks hold on any game:
its three-crate candidates are what costs a rotation (or a measured ladder) most of its time."""

from __future__ import annotations

from pathlib import Path

from pipeline.spec import SPECS_DIR, Spec, load_spec, spec_from_dict

TIERS = 2  # of tiny's three: 6 levels, 1 and 2 crates


def two_tier_tiny(**fields: object) -> Spec:
    """The tiny spec's first two tiers, with ``fields`` replaced (``compute="measured"``)."""
    data = load_spec("tiny").to_dict()
    data["tiers"] = data["tiers"][:TIERS]
    return spec_from_dict({**data, **fields})


def two_tier_tiny_file(folder: Path) -> Path:
    """``two_tier_tiny`` as a spec file in ``folder`` (for ``--spec``): tiny.toml's own text
    up to its third tier."""
    text = (SPECS_DIR / "tiny.toml").read_text(encoding="utf-8")
    head, *tiers = text.split("[[tiers]]")
    path = folder / "tiny.toml"
    path.write_text("[[tiers]]".join([head, *tiers[:TIERS]]).rstrip() + "\n", encoding="utf-8")
    assert load_spec(path).to_dict() == two_tier_tiny().to_dict()
    return path
