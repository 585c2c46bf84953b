"""Graph files written by DGL's ``dgl.save_graphs`` (format version 2, DGL >= 0.5), read without DGL.

The layout below is the one DGL's C++ code writes (``src/graph/serialize/
heterograph_serialize.cc``, ``heterograph.cc``, ``unit_graph.cc``,
``immutable_graph.cc``, ``include/dgl/aten/{coo,csr}.h``, ``src/runtime/
ndarray.cc``) through dmlc-core's serializer: little-endian scalars, a
``vector`` / ``string`` is a uint64 length then its items, a ``pair`` its two
items, a ``bool`` one byte::

    file      := u64 magic 0xDD2E4FF046B4A13F, u64 version (2), u64 graph type (2),
                 u64 num_graphs, zero padding to byte 4096,
                 u64 gdata_start_pos, vector<pair<string, ndarray>> labels,
                 graph_data * num_graphs, string(vector<u64> graph offsets), u64 size of that string
    graph_data:= heterograph, vector<vector<pair<string, ndarray>>> node tensors (per node type),
                 the same for edge tensors (per relation), vector<string> ntypes, vector<string> etypes
    heterograph := u64 magic 0xDD589FBE35224ABF, immutable_graph (the metagraph: node types ->
                 relations, relation id in the CSR data), vector<unit_graph>, vector<i64> node counts
    immutable_graph := u64 magic 0xDD3c5FFE20046ABF, csr
    unit_graph:= u64 magic 0xDD2E60F0F6B4A127, i64 saved formats, i64 allowed formats,
                 then for each saved format in the order COO, CSR, CSC: immutable_graph, coo | csr
                 (codes: bit 32 set -> low bits are a mask coo=1 csr=2 csc=4; else 1=coo 2=csr 3=csc)
    coo       := u64 magic 0xDD61ffd305dff127, i64 num_cols, i64 num_rows, ndarray row, col, data,
                 bool row_sorted, bool col_sorted
    csr       := u64 magic 0xDD6cd31205dff127, i64 num_cols, i64 num_rows, ndarray indptr,
                 indices, data, bool sorted
    ndarray   := u64 magic 0xDD5E40F096B4A13F, u64 reserved, i32 device type, i32 device id,
                 i32 ndim, u8 type code, u8 bits, u16 lanes, i64 shape[ndim], i64 byte size, bytes

An empty ``data`` array means edge ids 0..E-1 in storage order. CSC rows are
destination nodes. The file carries no checksum: everything structural is
checked before it is used (magic numbers, lengths against the bytes left,
counts against ``gnnc.data.limits``, CSR / COO arrays against each other and
the node counts, the trailing index of graph offsets), so a cut or damaged
structure is a ValueError naming the byte; a flipped bit inside tensor data
that keeps the structure valid cannot be detected. DGL stores bool tensors as uint8, and so does this reader.
Version-1 files (DGL < 0.5 ``DGLGraph``) are refused: re-save them with a
current DGL. ``write_dgl_graphs`` writes the same layout; it
exists to test the reader without DGL (it writes COO, CSR or CSC).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import torch

from ..graph import Graph, heterograph
from .integrity import check_file
from .limits import check_count

FILE_MAGIC = 0xDD2E4FF046B4A13F
HETERO_MAGIC = 0xDD589FBE35224ABF
IMMUTABLE_MAGIC = 0xDD3C5FFE20046ABF
UNIT_MAGIC = 0xDD2E60F0F6B4A127
COO_MAGIC = 0xDD61FFD305DFF127
CSR_MAGIC = 0xDD6CD31205DFF127
NDARRAY_MAGIC = 0xDD5E40F096B4A13F
HEADER_SIZE = 4096
HETERO_GRAPH_TYPE = 2
COO_CODE, CSR_CODE, CSC_CODE = 1, 2, 4
# (type code, bits) -> numpy dtype; code 4 is bfloat16, read as int16 and viewed.
_DTYPES = {
    (0, 8): np.int8,
    (0, 16): np.int16,
    (0, 32): np.int32,
    (0, 64): np.int64,
    (1, 8): np.uint8,
    (2, 16): np.float16,
    (2, 32): np.float32,
    (2, 64): np.float64,
    (4, 16): np.int16,
}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items() if k != (4, 16)}


def is_dgl_file(path) -> bool:
    """Whether ``path`` starts with the ``dgl.save_graphs`` magic number."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return len(head) == 8 and struct.unpack("<Q", head)[0] == FILE_MAGIC


def load_dgl_graphs(path) -> tuple[list[Graph], dict[str, torch.Tensor]]:
    """(graphs, graph labels) of a file written by ``dgl.save_graphs``.

    Node and relation names, node counts, edges in DGL edge-id order and all
    node / edge tensors are kept. FileNotFoundError for a missing file;
    ValueError naming the file and byte offset for anything else.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"DGL graph file {path} does not exist")
    check_file(path)
    r = _Reader(path, path.read_bytes())
    if len(r.buf) < 32 or r.u64() != FILE_MAGIC:
        raise ValueError(f"{path}: not a DGL graph file (no dgl.save_graphs magic number)")
    version, graph_type, num_graphs = r.u64(), r.u64(), r.u64()
    if version == 1:
        raise ValueError(
            f"{path}: DGL graph file format version 1 (DGL < 0.5); load and re-save it "
            f"with a current DGL (dgl.save_graphs) to read it here"
        )
    if version != 2 or graph_type != HETERO_GRAPH_TYPE:
        raise ValueError(
            f"{path}: DGL graph file version {version}, graph type {graph_type}; "
            f"only version 2 heterograph files can be read"
        )
    r.pos = HEADER_SIZE
    data_start = r.u64()
    labels = dict(r.vector(lambda: (r.string(), r.ndarray())))
    if data_start != r.pos:
        r.fail(f"the header places the graphs at byte {data_start}, the labels end here")
    starts, graphs = [], []
    for _ in range(num_graphs):
        starts.append(r.pos)
        graphs.append(_graph_data(r))
    _check_index(r, starts)
    return graphs, labels


def _check_index(r: _Reader, starts: list[int]) -> None:
    """The trailing index (the graphs' offsets, as a string, then its length) must match and end the file."""
    at = r.pos
    index = bytes(r.take(r.u64()))
    if index != struct.pack(f"<Q{len(starts)}Q", len(starts), *starts) or r.u64() != len(index) or r.pos != len(r.buf):
        r.pos = at
        r.fail("the trailing index of graph offsets does not match the graphs read")


class _Reader:
    """Little-endian cursor over the file's bytes; errors name the file and offset."""

    def __init__(self, path: Path, buf: bytes):
        self.path, self.buf, self.pos = path, memoryview(buf), 0

    def fail(self, what: str):
        raise ValueError(f"{self.path}, byte {self.pos}: {what}")

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            self.fail(f"truncated DGL graph file (needs {n} more bytes, {max(len(self.buf) - self.pos, 0)} left)")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def scalar(self, fmt: str):
        values = struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))
        return values[0] if len(values) == 1 else values

    def u64(self) -> int:
        return self.scalar("Q")

    def i64(self) -> int:
        return self.scalar("q")

    def magic(self, expected: int, what: str) -> None:
        start, found = self.pos, self.u64()
        if found != expected:
            self.pos = start
            self.fail(f"expected a {what} (magic {expected:#x}), found {found:#x}")

    def vector(self, item) -> list:
        n = self.u64()
        if n > len(self.buf) - self.pos:  # every item takes a byte at least
            self.fail(f"a list of {n} items in {len(self.buf) - self.pos} bytes")
        return [item() for _ in range(n)]

    def string(self) -> str:
        try:
            return bytes(self.take(self.u64())).decode("utf-8")
        except UnicodeDecodeError:
            self.fail("a name that is not UTF-8")

    def ndarray(self) -> torch.Tensor:
        self.magic(NDARRAY_MAGIC, "tensor")
        if self.u64() != 0 or self.scalar("ii") != (1, 0):
            self.fail("a tensor with a nonzero reserved field or not saved from the CPU")
        ndim, code, bits, lanes = self.scalar("i"), self.scalar("B"), self.scalar("B"), self.scalar("H")
        if (code, bits) not in _DTYPES or lanes != 1 or not 0 <= ndim <= 16:
            self.fail(f"tensor type code {code}, {bits} bits, {lanes} lanes, {ndim} dimensions is not supported")
        shape = [self.i64() for _ in range(ndim)]
        dtype = np.dtype(_DTYPES[(code, bits)])
        size, count = self.i64(), 1
        for n in shape:
            count *= n
        if min(shape, default=0) < 0 or size != count * dtype.itemsize:
            self.fail(f"tensor of shape {shape} and {bits}-bit items declares {size} bytes")
        arr = np.frombuffer(self.take(size), dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
        out = torch.from_numpy(arr)
        return out.view(torch.bfloat16) if code == 4 else out

    def matrix(self, magic: int, what: str, n_arrays: int, n_flags: int):
        self.magic(magic, what)
        at = self.pos
        num_cols, num_rows = (check_count(n, "nodes", f"{self.path}, byte {at}") for n in (self.i64(), self.i64()))
        arrays = [self.ndarray() for _ in range(n_arrays)]
        if any(a.dim() != 1 or a.dtype not in (torch.int32, torch.int64) for a in arrays):
            self.fail(f"the {what} holds arrays that are not 1-D integer ids")
        if any(flag > 1 for flag in bytes(self.take(n_flags))):
            self.fail(f"the {what}'s sorted flags are not booleans")
        return num_rows, num_cols, [a.to(torch.int64) for a in arrays]

    def csr(self):
        """(num_rows, num_cols, [indptr, indices, data]), checked against each other before use."""
        at = self.pos
        num_rows, num_cols, (indptr, indices, data) = self.matrix(CSR_MAGIC, "CSR matrix", 3, 1)
        nnz = indices.numel()
        if (
            indptr.numel() != num_rows + 1
            or indptr[0] != 0
            or indptr[-1] != nnz
            or bool((indptr[1:] < indptr[:-1]).any())
        ):
            self.pos = at
            self.fail(
                f"CSR indptr of {indptr.numel()} entries is not 0, non-decreasing, .., {nnz} for "
                f"{num_rows} rows and {nnz} column indices"
            )
        self.check_ids(at, "CSR", num_cols, indices, data, nnz)
        return num_rows, num_cols, [indptr, indices, data]

    def coo(self):
        at = self.pos
        num_rows, num_cols, (row, col, data) = self.matrix(COO_MAGIC, "COO matrix", 3, 2)
        if row.numel() != col.numel():
            self.pos = at
            self.fail(f"COO matrix of {row.numel()} rows and {col.numel()} columns")
        self.check_ids(at, "COO", num_rows, row)
        self.check_ids(at, "COO", num_cols, col, data, row.numel())
        return num_rows, num_cols, [row, col, data]

    def check_ids(self, at: int, what: str, count: int, ids: torch.Tensor, data=None, nnz: int = 0) -> None:
        """Fail at ``at`` unless ``ids`` lie in [0, count) and ``data`` (edge ids) is empty or of ``nnz``."""
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= count):
            self.pos = at
            self.fail(f"{what} matrix holds node ids outside [0, {count})")
        if data is not None and data.numel() not in (0, nnz):
            self.pos = at
            self.fail(f"{what} matrix holds {data.numel()} edge ids for {nnz} edges")

    def immutable_graph(self):
        self.magic(IMMUTABLE_MAGIC, "metagraph (immutable graph)")
        return self.csr()


def _edge_ids(data: torch.Tensor, count: int) -> torch.Tensor:
    return data if data.numel() else torch.arange(count)


def _csr_edges(num_rows, indptr, indices, data):
    """(rows, cols, edge ids) of a CSR matrix."""
    rows = torch.repeat_interleave(torch.arange(num_rows), indptr[1:] - indptr[:-1])
    return rows, indices, _edge_ids(data, indices.numel())


def _format_codes(r: _Reader) -> int:
    at, code = r.pos, r.i64()
    if code >> 32 == 1 and 0 < code & 0xFFFFFFFF <= 7:
        return code & 0xFFFFFFFF
    if code in (1, 2, 3):
        return {1: COO_CODE, 2: CSR_CODE, 3: CSC_CODE}[code]
    r.pos = at
    r.fail(f"relation graph format code {code:#x} is not a known sparse format")


def _unit_graph(r: _Reader) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """(src, dst, source nodes, destination nodes) of one relation in edge-id order, from the first
    saved format; every saved format must agree on the node counts."""
    start = r.pos
    r.magic(UNIT_MAGIC, "relation graph (unit graph)")
    saved = _format_codes(r)
    r.i64()  # the formats the graph may be converted to: nothing to read
    found = []
    for code in (COO_CODE, CSR_CODE, CSC_CODE):
        if saved & code:
            meta_rows, _, _ = r.immutable_graph()
            if meta_rows not in (1, 2):
                r.fail(f"relation graph's own metagraph has {meta_rows} node types, not 1 or 2")
            if code == COO_CODE:
                n_src, n_dst, (row, col, data) = r.coo()
                found.append((row, col, _edge_ids(data, row.numel()), n_src, n_dst))
            else:
                num_rows, num_cols, (indptr, indices, data) = r.csr()
                rows, cols, eids = _csr_edges(num_rows, indptr, indices, data)
                found.append(
                    (rows, cols, eids, num_rows, num_cols)
                    if code == CSR_CODE
                    else (cols, rows, eids, num_cols, num_rows)
                )
    src, dst, eids, n_src, n_dst = found[0]
    if any((f[3], f[4], f[0].numel()) != (n_src, n_dst, src.numel()) for f in found):
        r.pos = start
        r.fail("relation graph's saved formats disagree on node or edge counts")
    order = torch.argsort(eids)
    if not torch.equal(eids[order], torch.arange(eids.numel())):
        r.fail("relation graph edge ids are not 0..E-1")
    return src[order], dst[order], n_src, n_dst


def _graph_data(r: _Reader) -> Graph:
    r.magic(HETERO_MAGIC, "heterograph")
    meta_rows, meta_cols, meta = r.immutable_graph()
    if meta_cols != meta_rows:
        r.fail(f"metagraph of {meta_rows} x {meta_cols} node types")
    relations = r.vector(lambda: _unit_graph(r))
    counts_at = r.pos
    counts = [check_count(n, "nodes", f"{r.path}, byte {counts_at}") for n in r.vector(r.i64)]
    node_tensors = r.vector(lambda: r.vector(lambda: (r.string(), r.ndarray())))
    edge_tensors = r.vector(lambda: r.vector(lambda: (r.string(), r.ndarray())))
    ntypes, etypes = r.vector(r.string), r.vector(r.string)
    meta_src, meta_dst, meta_ids = _csr_edges(meta_rows, *meta)
    if not (
        len(ntypes) == len(counts) == meta_rows == len(node_tensors)
        and len(etypes) == len(relations) == meta_ids.numel() == len(edge_tensors)
    ):
        r.pos = counts_at
        r.fail(
            f"graph lists {len(ntypes)} node types, {len(counts)} node counts, {len(etypes)} relation "
            f"names and {len(relations)} relation graphs; these must agree with the metagraph"
        )
    ends = {int(e): (int(s), int(d)) for s, d, e in zip(meta_src, meta_dst, meta_ids)}
    if (
        len(set(ntypes)) != len(ntypes)
        or sorted(ends) != list(range(len(etypes)))
        or any((counts[ends[e][0]], counts[ends[e][1]]) != rel[2:] for e, rel in enumerate(relations))
    ):
        r.pos = counts_at
        r.fail("node types, metagraph edge ids and the relations' node counts do not agree")
    keys = [(ntypes[ends[e][0]], etypes[e], ntypes[ends[e][1]]) for e in range(len(etypes))]
    try:
        g = heterograph({k: rel[:2] for k, rel in zip(keys, relations)}, num_nodes=dict(zip(ntypes, counts)))
        for ntype, items in zip(ntypes, node_tensors):
            for name, value in items:
                g.nodes[ntype].data[name] = value
        for key, items in zip(keys, edge_tensors):
            for name, value in items:
                g.edges[key].data[name] = value
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as err:
        raise ValueError(f"{r.path}: graph ending at byte {r.pos} is inconsistent ({err})") from None
    return g


# ------------------------------------------------------------------ writer
class _Writer:
    def __init__(self):
        self.parts: list[bytes] = []
        self.count = 0

    def raw(self, data: bytes) -> None:
        self.parts.append(data)
        self.count += len(data)

    def scalar(self, fmt: str, value) -> None:
        self.raw(struct.pack("<" + fmt, value))

    def vector(self, items, write) -> None:
        self.scalar("Q", len(items))
        for item in items:
            write(item)

    def string(self, s: str) -> None:
        data = s.encode("utf-8")
        self.scalar("Q", len(data))
        self.raw(data)

    def ndarray(self, t: torch.Tensor) -> None:
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bool:
            t = t.to(torch.uint8)  # as DGL's zerocopy_to_dgl_ndarray does
        arr = t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
        code, bits = (4, 16) if t.dtype == torch.bfloat16 else _CODES[arr.dtype]
        self.scalar("Q", NDARRAY_MAGIC)
        self.scalar("Q", 0)
        self.raw(struct.pack("<ii", 1, 0))  # kDGLCPU, device 0
        self.raw(struct.pack("<iBBH", arr.ndim, code, bits, 1))
        for n in arr.shape:
            self.scalar("q", n)
        self.scalar("q", arr.nbytes)
        self.raw(arr.astype(arr.dtype.newbyteorder("<")).tobytes())

    def matrix(self, magic: int, num_rows: int, num_cols: int, arrays, flags: int) -> None:
        self.scalar("Q", magic)
        self.scalar("q", num_cols)
        self.scalar("q", num_rows)
        for a in arrays:
            self.ndarray(torch.as_tensor(a, dtype=torch.int64))
        self.raw(bytes(flags))

    def csr(self, rows, cols, n_rows: int, n_cols: int) -> None:
        """CSR of the (row, col) pairs, edge ids (their positions) in the data array."""
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_rows))])
        self.matrix(CSR_MAGIC, n_rows, n_cols, (indptr, np.asarray(cols, dtype=np.int64)[order], order), 1)

    def immutable_graph(self, num_nodes: int, src, dst) -> None:
        """An ImmutableGraph, saved as its out-CSR."""
        self.scalar("Q", IMMUTABLE_MAGIC)
        self.csr(src, dst, num_nodes, num_nodes)

    def unit_graph(self, src, dst, n_src: int, n_dst: int, bipartite: bool, codes: int) -> None:
        self.scalar("Q", UNIT_MAGIC)
        self.scalar("q", codes | 1 << 32)
        self.scalar("q", (COO_CODE | CSR_CODE | CSC_CODE) | 1 << 32)
        for code in (COO_CODE, CSR_CODE, CSC_CODE):
            if not codes & code:
                continue
            self.immutable_graph(2, [0], [1]) if bipartite else self.immutable_graph(1, [0], [0])
            if code == COO_CODE:
                self.matrix(COO_MAGIC, n_src, n_dst, (src, dst, np.zeros(0, dtype=np.int64)), 2)
            elif code == CSR_CODE:
                self.csr(src, dst, n_src, n_dst)
            else:
                self.csr(dst, src, n_dst, n_src)


def write_dgl_graphs(path, graphs, labels: dict | None = None, formats=("coo",)) -> None:
    """Write gnnc graphs in ``dgl.save_graphs``' layout, for tests of ``load_dgl_graphs``.

    ``formats``: which of 'coo', 'csr', 'csc' each relation is saved in, as
    ``save_graphs(..., formats=)`` does.
    """
    codes = sum({"coo": COO_CODE, "csr": CSR_CODE, "csc": CSC_CODE}[f] for f in set(formats))
    w = _Writer()
    w.raw(struct.pack("<4Q", FILE_MAGIC, 2, HETERO_GRAPH_TYPE, len(graphs)).ljust(HEADER_SIZE, b"\0"))
    label_part = _Writer()
    label_part.vector(list((labels or {}).items()), lambda kv: (label_part.string(kv[0]), label_part.ndarray(kv[1])))
    label_blob = b"".join(label_part.parts)
    w.scalar("Q", w.count + 8 + len(label_blob))
    w.raw(label_blob)
    offsets = []
    for g in graphs:
        offsets.append(w.count)
        _write_graph(w, g, codes)
    index = struct.pack("<Q", len(offsets)) + struct.pack(f"<{len(offsets)}Q", *offsets)
    w.scalar("Q", len(index))  # the offsets vector, written as a string
    w.raw(index)
    w.scalar("Q", len(index))
    Path(path).write_bytes(b"".join(w.parts))


def _write_graph(w: _Writer, g: Graph, codes: int) -> None:
    rels = g.canonical_etypes
    w.scalar("Q", HETERO_MAGIC)
    w.immutable_graph(len(g.ntypes), [g.ntype_id(s) for s, _, _ in rels], [g.ntype_id(d) for _, _, d in rels])
    w.scalar("Q", len(rels))
    for s, r, d in rels:
        src, dst = g.find_edges((s, r, d))
        w.unit_graph(src, dst, g.num_nodes(s), g.num_nodes(d), s != d, codes)
    w.vector([g.num_nodes(t) for t in g.ntypes], lambda n: w.scalar("q", n))
    for spaces, names in ((g.nodes, g.ntypes), (g.edges, rels)):
        w.vector(
            [dict(spaces[n].data) for n in names],
            lambda feats: w.vector(list(feats.items()), lambda kv: (w.string(kv[0]), w.ndarray(kv[1]))),
        )
    w.vector(g.ntypes, w.string)
    w.vector([r for _, r, _ in rels], w.string)
