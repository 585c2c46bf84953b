"""A small strict reader of N-Triples files (``.nt``, and ``.n3`` files written as N-Triples), gzipped or not.

Each non-blank line that is not a comment must be one triple, ``subject predicate object .``: IRIs in
``<...>``, blank nodes ``_:label``, literals ``"..."`` with ``@lang`` or ``^^<datatype>``; anything else
(Turtle's prefixes, ``;`` / ``,`` lists, a line longer than ``gnnc.data.limits``' ``max_text_line``) is a
ValueError naming the file and the line. The triples of one file are returned once each, as rdflib's
``Graph`` holds them.

A term is a tuple that sorts as rdflib sorts its terms (the order DGL's RDF datasets number entities in):
blank nodes before IRIs before literals, IRIs and blank nodes by their text; literals as rdflib orders
them, numbers by value, others by datatype, language and text. rdflib's literal comparison is not a total
order between numbers and other datatypes, or between literals differing only by datatype; there the tuple
decides. Literals are normalised as rdflib normalises them (``"01"^^xsd:integer`` is ``1``, booleans
``true`` / ``false``, doubles as Python prints the float). Blank node labels are the file's: rdflib gives
each a fresh random id, so DGL's own order of blank nodes changes from run to run.
"""

from __future__ import annotations

import gzip
import io
import math
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

from . import limits
from .integrity import check_file

BNODE, IRI, LITERAL = 0, 1, 2
XSD = "http://www.w3.org/2001/XMLSchema#"
_INTEGERS = frozenset(
    XSD + name
    for name in (
        "integer",
        "int",
        "long",
        "short",
        "byte",
        "nonNegativeInteger",
        "nonPositiveInteger",
        "positiveInteger",
        "negativeInteger",
        "unsignedLong",
        "unsignedInt",
        "unsignedShort",
        "unsignedByte",
    )
)
_FLOATS = frozenset((XSD + "double", XSD + "float"))
_NUMBERS = (XSD + "decimal", 0)  # the group numbers sort in, before other literals of the same datatype text
_STRING = XSD + "string"

_IRI = r'<([^\s<>"]*)>'
_TERM = rf"{_IRI}|_:([A-Za-z0-9_:](?:[-A-Za-z0-9_:.]*[-A-Za-z0-9_:])?)"
_LITERAL = r'"((?:[^"\\\r\n]|\\.)*)"(?:@([a-zA-Z]+(?:-[a-zA-Z0-9]+)*)|\^\^' + _IRI + ")?"
_LINE = re.compile(rf"[ \t]*(?:{_TERM})[ \t]*{_IRI}[ \t]*(?:{_TERM}|{_LITERAL})[ \t]*\.[ \t]*(?:#.*)?")
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|([tbnrf\"'\\]))|\\")
_CHARS = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def read_triples(path) -> dict[tuple, int]:
    """``{(subject, predicate, object): line}`` of the file at ``path`` (``.gz``: gunzipped), each triple
    once, with the line it first appears on; ValueError naming the file and the line for anything else."""
    path = Path(path)
    check_file(path)
    limit = limits.LIMITS.max_text_line
    triples: dict[tuple, int] = {}
    terms: dict[tuple, tuple] = {}  # one tuple per distinct term: a big file repeats its IRIs on many lines
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    with io.TextIOWrapper(raw, encoding="utf-8") as f:
        lineno = 0
        try:
            while line := f.readline(limit + 1):
                lineno += 1
                if len(line) > limit:
                    raise ValueError(
                        f"{path}, line {lineno}: longer than {limit:,} characters "
                        "(gnnc.data.limits.configure(max_text_line=...))"
                    )
                stripped = line.strip()
                if stripped and not stripped.startswith("#"):
                    triple = tuple(terms.setdefault(t, t) for t in _triple(line.rstrip("\r\n"), path, lineno))
                    triples.setdefault(triple, lineno)
                    if len(triples) > limits.LIMITS.max_edges:
                        limits.check_count(len(triples), "edges", f"{path}, line {lineno}")
        except (UnicodeDecodeError, EOFError, OSError, gzip.BadGzipFile) as err:
            raise ValueError(f"{path}, after line {lineno}: not a readable N-Triples file ({err})") from None
    return triples


def _triple(line: str, path: Path, lineno: int) -> tuple:
    m = _LINE.fullmatch(line)
    if m is None:
        raise ValueError(
            f"{path}, line {lineno}: not an N-Triples triple (<subject> <predicate> object .): {line[:200]!r}"
        )
    s_iri, s_bnode, pred, o_iri, o_bnode, lexical, lang, datatype = m.groups()
    try:
        subject = _node(s_iri, s_bnode)
        obj = _node(o_iri, o_bnode) if lexical is None else literal(_unescape(lexical), lang, datatype)
        return subject, (IRI, _unescape(pred)), obj
    except ValueError as err:
        raise ValueError(f"{path}, line {lineno}: {err}: {line[:200]!r}") from None


def _node(iri: str | None, bnode: str | None) -> tuple:
    return (IRI, _unescape(iri)) if iri is not None else (BNODE, bnode)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text

    def one(m: re.Match) -> str:
        short, long, char = m.groups()
        if short or long:
            code = int(short or long, 16)
            if code > 0x10FFFF:
                raise ValueError(f"escape \\U{long} is beyond Unicode")
            return chr(code)
        if char is None:
            raise ValueError("a backslash that starts no N-Triples escape")
        return _CHARS[char]

    return _ESCAPE.sub(one, text)


def literal(lexical: str, lang: str | None = None, datatype: str | None = None) -> tuple:
    """The term of a literal, its text normalised as rdflib normalises it."""
    value = None
    if datatype is not None:
        datatype = _unescape(datatype)
    if datatype in _INTEGERS:
        try:
            value = int(lexical)
            lexical = str(value)
        except ValueError:
            pass
    elif datatype in _FLOATS:
        try:
            number = float(lexical)
            lexical = str(number)
            value = None if math.isnan(number) else number
        except ValueError:
            pass
    elif datatype == XSD + "decimal":
        try:
            value = Decimal(lexical)
            value = value if value.is_finite() else None
        except InvalidOperation:
            pass
    elif datatype == XSD + "boolean":
        lexical = "true" if lexical.lower() in ("true", "1") else "false"
    group = _NUMBERS if value is not None else (datatype or _STRING, 1)
    return (
        LITERAL,
        group,
        value if value is not None else "",
        (1, lang) if lang else (0, ""),
        lexical,
        (1, datatype) if datatype else (0, ""),
    )


def text(term: tuple) -> str:
    """What rdflib's ``str(term)`` gives: an IRI, a blank node's label, a literal's (normalised) text."""
    return term[4] if term[0] == LITERAL else term[1]
