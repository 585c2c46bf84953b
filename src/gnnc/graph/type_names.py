"""DGL's derived type names: the relation-name map and the names of combined types."""

from __future__ import annotations


def etype_to_canonical(canonical_etypes) -> dict:
    """Relation name -> its ``(src_type, name, dst_type)``, or ``()`` where several relations share the name
    (DGL's ``g._etype2canonical``, its marker of an ambiguous name)."""
    out: dict = {}
    for triple in canonical_etypes:
        out[triple[1]] = () if triple[1] in out else triple
    return out


def combine_names(names: list[str], ids) -> str:
    """The name of the types ``names[i]`` for ``i`` in ``ids`` taken as one: sorted, joined with ``+`` (DGL's)."""
    return "+".join(sorted(names[i] for i in ids))
