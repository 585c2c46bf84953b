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
destination nodes. DGL stores bool tensors as uint8, and so does this reader.
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
_DTYPES = {(0, 8): np.int8, (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64,
           (1, 8): np.uint8, (2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64,
           (4, 16): np.int16}
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
    r = _Reader(path, path.read_bytes())
    if len(r.buf) < 32 or r.u64() != FILE_MAGIC:
        raise ValueError(f"{path}: not a DGL graph file (no dgl.save_graphs magic number)")
    version, graph_type, num_graphs = r.u64(), r.u64(), r.u64()
    if version == 1:
        raise ValueError(f"{path}: DGL graph file format version 1 (DGL < 0.5); load and re-save it "
                         f"with a current DGL (dgl.save_graphs) to read it here")
    if version != 2 or graph_type != HETERO_GRAPH_TYPE:
        raise ValueError(f"{path}: DGL graph file version {version}, graph type {graph_type}; "
                         f"only version 2 heterograph files can be read")
    r.pos = HEADER_SIZE
    r.u64()  # gdata_start_pos: the graphs follow the labels
    labels = {name: value for name, value in r.vector(lambda: (r.string(), r.ndarray()))}
    graphs = [_graph_data(r) for _ in range(num_graphs)]
    return graphs, labels


class _Reader:
    """Little-endian cursor over the file's bytes; errors name the file and offset."""

    def __init__(self, path: Path, buf: bytes):
        self.path, self.buf, self.pos = path, memoryview(buf), 0

    def fail(self, what: str):
        raise ValueError(f"{self.path}, byte {self.pos}: {what}")

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            self.fail(f"truncated DGL graph file (needs {n} more bytes, {len(self.buf) - self.pos} left)")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def scalar(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

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
        return [item() for _ in range(self.u64())]

    def string(self) -> str:
        return bytes(self.take(self.u64())).decode("utf-8")

    def ndarray(self) -> torch.Tensor:
        self.magic(NDARRAY_MAGIC, "tensor")
        self.u64()  # reserved
        self.take(8)  # context: always saved as CPU
        ndim, code, bits, lanes = self.scalar("i"), self.scalar("B"), self.scalar("B"), self.scalar("H")
        if (code, bits) not in _DTYPES or lanes != 1:
            self.fail(f"tensor type code {code}, {bits} bits, {lanes} lanes is not supported")
        shape = [self.i64() for _ in range(ndim)]
        dtype = np.dtype(_DTYPES[(code, bits)])
        size = self.i64()
        if size != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            self.fail(f"tensor of shape {shape} and {bits}-bit items declares {size} bytes")
        arr = np.frombuffer(self.take(size), dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
        out = torch.from_numpy(arr)
        return out.view(torch.bfloat16) if code == 4 else out

    def matrix(self, magic: int, what: str, n_arrays: int, n_flags: int):
        self.magic(magic, what)
        num_cols, num_rows = self.i64(), self.i64()
        arrays = [self.ndarray().to(torch.int64) for _ in range(n_arrays)]
        self.take(n_flags)  # sorted flags
        return num_rows, num_cols, arrays

    def csr(self):
        return self.matrix(CSR_MAGIC, "CSR matrix", 3, 1)

    def immutable_graph(self):
        self.magic(IMMUTABLE_MAGIC, "metagraph (immutable graph)")
        return self.csr()


def _edge_ids(data: torch.Tensor, count: int) -> torch.Tensor:
    return data if data.numel() else torch.arange(count)


def _csr_edges(num_rows, indptr, indices, data):
    """(rows, cols, edge ids) of a CSR matrix."""
    rows = torch.repeat_interleave(torch.arange(num_rows), indptr[1:] - indptr[:-1])
    return rows, indices, _edge_ids(data, indices.numel())


def _unit_graph(r: _Reader) -> tuple[torch.Tensor, torch.Tensor]:
    """(src, dst) of one relation in edge-id order, from the first saved format."""
    r.magic(UNIT_MAGIC, "relation graph (unit graph)")
    saved, _allowed = r.i64(), r.i64()
    saved = saved & 0xFFFFFFFF if saved >> 32 else {1: COO_CODE, 2: CSR_CODE, 3: CSC_CODE}.get(saved, 0)
    found = []
    for code in (COO_CODE, CSR_CODE, CSC_CODE):
        if saved & code:
            r.immutable_graph()
            if code == COO_CODE:
                _, _, (row, col, data) = r.matrix(COO_MAGIC, "COO matrix", 3, 2)
                found.append((row, col, _edge_ids(data, row.numel())))
            else:
                num_rows, _, (indptr, indices, data) = r.csr()
                rows, cols, eids = _csr_edges(num_rows, indptr, indices, data)
                found.append((rows, cols, eids) if code == CSR_CODE else (cols, rows, eids))
    if not found:
        r.fail(f"relation graph saves no known sparse format (code {saved:#x})")
    src, dst, eids = found[0]
    order = torch.argsort(eids)
    if not torch.equal(eids[order], torch.arange(eids.numel())):
        r.fail("relation graph edge ids are not 0..E-1")
    return src[order], dst[order]


def _graph_data(r: _Reader) -> Graph:
    r.magic(HETERO_MAGIC, "heterograph")
    meta_rows, _, meta = r.immutable_graph()
    relations = r.vector(lambda: _unit_graph(r))
    counts_at = r.pos
    counts = r.vector(r.i64)
    node_tensors = r.vector(lambda: r.vector(lambda: (r.string(), r.ndarray())))
    edge_tensors = r.vector(lambda: r.vector(lambda: (r.string(), r.ndarray())))
    ntypes, etypes = r.vector(r.string), r.vector(r.string)
    meta_src, meta_dst, meta_ids = _csr_edges(meta_rows, *meta)
    if not (len(ntypes) == len(counts) == meta_rows == len(node_tensors)
            and len(etypes) == len(relations) == meta_ids.numel() == len(edge_tensors)):
        r.pos = counts_at
        r.fail(f"graph lists {len(ntypes)} node types, {len(counts)} node counts, {len(etypes)} relation "
               f"names and {len(relations)} relation graphs; these must agree with the metagraph")
    ends = {int(e): (ntypes[int(s)], ntypes[int(d)]) for s, d, e in zip(meta_src, meta_dst, meta_ids)}
    keys = [(ends[e][0], etypes[e], ends[e][1]) for e in range(len(etypes))]
    try:
        g = heterograph({k: rel for k, rel in zip(keys, relations)}, num_nodes=dict(zip(ntypes, counts)))
        for ntype, items in zip(ntypes, node_tensors):
            for name, value in items:
                g.nodes[ntype].data[name] = value
        for key, items in zip(keys, edge_tensors):
            for name, value in items:
                g.edges[key].data[name] = value
    except (ValueError, KeyError) as err:
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
        w.vector([dict(spaces[n].data) for n in names],
                 lambda feats: w.vector(list(feats.items()), lambda kv: (w.string(kv[0]), w.ndarray(kv[1]))))
    w.vector(g.ntypes, w.string)
    w.vector([r for _, r, _ in rels], w.string)
