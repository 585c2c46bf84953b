"""Source of the numba loops of an edge expression (``gnnc.backend.pytorch.edge_expr``), generated from
its program: the message is computed element by element inside the loop over each row's edges, so no
[E, ...] value is ever written.

Per edge, the message's elements are visited by nested loops over its dims (constant extents: a kernel is
generated per program and shapes). Every value of the program is computed in the outermost loop where all
the dims it varies along are bound: a Gaussian weight per kernel is computed once per kernel, not once per
(kernel, feature). A sum over a last dim is a loop of its own inside the loop of the value it feeds.
exp and sigmoid call ``fastexp.vexp``, which LLVM vectorizes over the innermost loop (numba's libm exp
stays one scalar call per element: half the speed of the whole loop on GatedGCN's gate); tanh stays
numpy's (1 - 2 / (exp(2x) + 1) loses the precision of small x).

Backward is reverse mode over the same loops, generated from the same program: each value gets an
adjoint scalar, zeroed where the value is computed, added to by its consumers (a broadcast value's adjoint
sums over the loops it is broadcast along) and passed on to its operands after those loops; a sum's
operand is recomputed in a second loop over the summed dim. Adjoints of operands go straight to their
gradient rows: ``write`` names the operand kinds one kernel writes (the loop over destinations writes edge,
destination and shared operands; the loop over sources writes source operands; no two threads write one
row, shared gradients go to a per-thread copy).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..pytorch.edge_expr import BINARY, ROW
from .codegen import indent

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_ROWS = {"src": "u", "dst": "v", "edge": "e"}  # the loop variable that is an operand's row
AHEAD = 8  # how many edges ahead the rows read at random are prefetched


@dataclass(eq=False)
class _Scope:
    """A loop (the edge's own body at the top): what it computes, in order; its dims' variable."""

    parent: _Scope | None
    var: str = ""
    extent: int = 0
    items: list = field(default_factory=list)  # str lines and _Value sums, forward order


@dataclass(eq=False)
class _Value:
    name: str
    step: int
    scope: _Scope
    op: str
    children: list
    leaf: int = -1  # operand index when the value reads an operand
    flat: str = "0"  # the operand element (leaves) or output element (the message)
    body: _Scope | None = None  # sums: the loop over the summed dim
    constant: str = ""


class EdgeProgram:
    """The loops of one program for given operand kinds and shapes, in dtype ``dtype`` (a numpy name)."""

    def __init__(self, program: tuple, kinds: tuple[str, ...], shapes: list, dtype: str):
        self.program, self.kinds, self.shapes, self.dtype = program, kinds, shapes, dtype
        self.top = _Scope(None)
        self.values: list[_Value] = []
        self._memo: dict = {}
        self._scope_of_var: dict[str, _Scope] = {}
        out = shapes[-1][1:]
        self.out_width = _prod(out)
        self.out_scopes = []
        scope, idx = self.top, ["r"]
        for d, n in enumerate(out):
            if n == 1:
                idx.append("0")
                continue
            scope = _Scope(scope, f"i{d}", n)
            self._scope_of_var[scope.var] = scope
            self.out_scopes.append(scope)
            idx.append(scope.var)
        self.root = self._value(len(program) - 1, tuple(idx))
        self.out_flat = _flat(tuple(idx)[1:], out)

    def lit(self, value) -> str:
        return f"np.{self.dtype}({float(value)!r})"

    # ---------------------------------------------------------------- forward values
    def _scope(self, idx) -> _Scope:
        """The innermost loop binding one of ``idx``'s variables (the top when none)."""
        deepest = self.top
        for var in idx:
            s = self._scope_of_var.get(var)
            if s is not None and _depth(s) > _depth(deepest):
                deepest = s
        return deepest

    def _child_idx(self, parent_idx, child: int):
        """The elements of step ``child`` an element ``parent_idx`` of a broadcasting consumer reads."""
        shape = self.shapes[child]
        tail = parent_idx[len(parent_idx) - len(shape) :] if shape else ()
        return tuple("0" if n == 1 else var for n, var in zip(shape, tail))

    def _value(self, step: int, idx: tuple) -> _Value:
        key = (step, idx)
        if key not in self._memo:
            self._memo[key] = self._make(step, idx)
        return self._memo[key]

    def _make(self, step: int, idx: tuple) -> _Value:
        op, args = self.program[step][0], self.program[step][1:]
        if op == "unsqueeze":
            return self._value(args[0], idx[: args[1]] + idx[args[1] + 1 :])
        if op == "squeeze":
            return self._value(args[0], idx[: args[1]] + ("0",) + idx[args[1] :])
        if op == "sum" and self.shapes[args[0]][-1] == 1:
            return self._value(args[0], (idx[:-1] if args[1] else idx) + ("0",))
        name = f"t{len(self.values)}_{step}"
        scope = self._scope(idx)
        if op == "operand":
            value = _Value(name, step, scope, op, [], leaf=args[0], flat=self._leaf_flat(args[0], step, idx))
            scope.items.append(f"{name} = {self._load(value)}")
        elif op == "const":
            value = _Value(name, step, scope, op, [], constant=self.lit(args[0]))
            scope.items.append(f"{name} = {value.constant}")
        elif op == "sum":
            extent = self.shapes[args[0]][-1]
            body = _Scope(scope, f"j{len(self.values)}", extent)
            self._scope_of_var[body.var] = body
            child = self._value(args[0], (idx[:-1] if args[1] else idx) + (body.var,))
            value = _Value(name, step, scope, op, [child], body=body)
            scope.items.append(value)
        else:
            children = [self._value(a, self._child_idx(idx, a)) for a in args[: 2 if op in BINARY else 1]]
            value = _Value(name, step, scope, op, children)
            scope.items.append(f"{name} = {self._expression(value, args)}")
        self.values.append(value)
        return value

    def _leaf_flat(self, k: int, step: int, idx: tuple) -> str:
        shape = self.shapes[step]
        rowed = self.kinds[k] != "shared"
        return _flat(idx[1:] if rowed else idx, shape[1:] if rowed else shape)

    def _load(self, leaf: _Value) -> str:
        k = leaf.leaf
        kind = self.kinds[k]
        return f"x{k}[{leaf.flat}]" if kind == "shared" else f"x{k}[{_ROWS[kind]}, {leaf.flat}]"

    def _expression(self, value: _Value, args) -> str:
        op, names = value.op, [c.name for c in value.children]
        if op in _INFIX:
            return f"{names[0]} {_INFIX[op]} {names[1]}"
        if op == "neg":
            return f"-{names[0]}"
        if op == "exp":
            return f"vexp({names[0]})"
        if op == "tanh":
            return f"np.tanh({names[0]})"
        if op == "sigmoid":
            return f"{self.lit(1)} / ({self.lit(1)} + vexp(-{names[0]}))"
        if op == "pow":
            return f"{names[0]} * {names[0]}" if args[1] == 2 else f"{names[0]} ** {self.lit(args[1])}"
        if op == "leaky_relu":
            return f"{names[0]} if {names[0]} > 0 else {names[0]} * {self.lit(args[1])}"
        raise ValueError(f"edge expression: no code for {op!r}")

    # ---------------------------------------------------------------- kernels
    def forward_source(self, name: str, mean: bool) -> str:
        """``name(bounds, crow, col, perm, x0, ..., out)``: out[v] = the sum (or mean) over v's in-edges of the
        message (CSR by destination: col the sources, perm the edge ids)."""
        body = self._forward_scope(self.top, 0)
        args = ", ".join(f"x{k}" for k in range(len(self.kinds)))
        lines = [
            f"def {name}(bounds, crow, col, perm, {args}, out):",
            "    for v in range(bounds[0], bounds[-1]):",
            f"        for k in range({self.out_width}):",
            f"            out[v, k] = {self.lit(0)}",
            "        for i in range(crow[v], crow[v + 1]):",
            *indent(self._prefetches({"src": "col", "edge": "perm"}), 3),
            "            u = col[i]",
            "            e = perm[i]",
            *indent(body, 3),
        ]
        if mean:
            lines += [
                "        if crow[v + 1] > crow[v]:",
                f"            n = np.{self.dtype}(crow[v + 1] - crow[v])",
                f"            for k in range({self.out_width}):",
                "                out[v, k] = out[v, k] / n",
            ]
        return "\n".join(lines) + "\n"

    def _forward_items(self, scope: _Scope) -> list[str]:
        lines = []
        for item in scope.items:
            if isinstance(item, str):
                lines.append(item)
                continue
            child = item.children[0]
            lines += [f"{item.name} = {self.lit(0)}", f"for {item.body.var} in range({item.body.extent}):"]
            lines += indent(self._forward_items(item.body) + [f"{item.name} += {child.name}"], 1)
        return lines

    def _forward_scope(self, scope: _Scope, depth: int) -> list[str]:
        lines = self._forward_items(scope)
        if depth < len(self.out_scopes):
            inner = self.out_scopes[depth]
            lines += [f"for {inner.var} in range({inner.extent}):"]
            lines += indent(self._forward_scope(inner, depth + 1), 1)
        else:
            lines.append(f"out[v, {self.out_flat}] += {self.root.name}")
        return lines

    def backward_source(
        self, name: str, write: frozenset[int], by_source: bool, init: frozenset[int] = frozenset()
    ) -> str | None:
        """``name(bounds, crow, col, perm, x0, ..., grad, g0, ..., partial)``: adds to the gradient ``gk`` of
        every operand k in ``write`` (others get a placeholder) the adjoint of the message
        under upstream ``grad`` [num_dst, out width] (already divided by the in-degree for a mean);
        shared gradients go into ``partial`` at their operand's offset (``shared_offsets``). Loops over
        destinations (CSR by destination) or, ``by_source``, over sources (CSR by source: col the
        destinations). The gradients of the operands in ``init`` are written, not added to: zeroed by the
        kernel itself (an edge's row when the edge is visited, a source's or destination's row when its
        loop starts), so they need no zeroed buffer; every row the loop visits must be all of theirs.
        None when nothing written depends on the message."""
        self._need = {}
        for value in self.values:
            self._need[value] = (
                value.leaf in write
                if value.op == "operand"
                else value.op != "const" and any(self._need[c] for c in value.children)
            )
        if not self._need[self.root]:
            return None
        self._offsets = self.shared_offsets()
        body = self._backward_scope(self.top, 0)
        k = len(self.kinds)
        row, other = ("u", "v") if by_source else ("v", "u")
        row_kind = "src" if by_source else "dst"
        lines = [
            f"def {name}(bounds, crow, col, perm, {', '.join(f'x{i}' for i in range(k))}, grad, "
            f"{', '.join(f'g{i}' for i in range(k))}, partial):",
            f"    for {row} in range(bounds[0], bounds[-1]):",
            *indent(self._zero_rows(init & write, row_kind, row), 2),
            "        for i in range(crow[" + row + "], crow[" + row + " + 1]):",
            *indent(self._prefetches({"dst" if by_source else "src": "col", "edge": "perm"}, by_source), 3),
            f"            {other} = col[i]",
            "            e = perm[i]",
            *indent(self._zero_rows(init & write, "edge", "e"), 3),
            *indent(body, 3),
        ]
        return "\n".join(lines) + "\n"

    def _zero_rows(self, operands: frozenset[int], kind: str, row: str) -> list[str]:
        """Lines zeroing row ``row`` of the gradients of ``operands`` of kind ``kind``."""
        lines = []
        for k in sorted(operands):
            if self.kinds[k] == kind:
                lines += [f"for z in range({self._width(k)}):", f"    g{k}[{row}, z] = {self.lit(0)}"]
        return lines

    def _prefetches(self, index: dict[str, str], grad: bool = False) -> list[str]:
        """Lines prefetching, ``AHEAD`` edges early, the rows of the operands of the kinds in ``index`` that the
        loop reads at random (by that index array), and with ``grad`` the upstream gradient's by ``col``."""
        reads = [(f"x{k}", index[kind], self._width(k)) for k, kind in enumerate(self.kinds) if kind in index]
        reads += [("grad", "col", self.out_width)] if grad else []
        if not reads:
            return []
        lines = [f"if i + {AHEAD} < perm.shape[0]:"]
        for table, by, width in reads:
            lines.append(f"    prefetch_span({table}, {by}[i + {AHEAD}] * {width}, {width})")
        return lines

    def _width(self, k: int) -> int:
        return _prod(self.shapes[self._operand_step(k)][1:])

    def shared_offsets(self) -> dict[int, int]:
        """Where each shared operand's gradient starts in the backward kernels' ``partial``."""
        offsets, at = {}, 0
        for k, kind in enumerate(self.kinds):
            if kind == "shared":
                offsets[k] = at
                at += _prod(self.shapes[self._operand_step(k)])
        self.partial_width = at
        return offsets

    def _operand_step(self, k: int) -> int:
        return next(i for i, s in enumerate(self.program) if s[0] == "operand" and s[1] == k)

    def _inits(self, scope: _Scope) -> list[str]:
        return [
            f"d{v.name} = {self.lit(0)}"
            for v in self.values
            if v.scope is scope and self._need[v] and v.op not in ("operand", "const") and v is not self.root
        ]

    def _backward_scope(self, scope: _Scope, depth: int) -> list[str]:
        lines = self._forward_items(scope) + self._inits(scope)
        if depth < len(self.out_scopes):
            inner = self.out_scopes[depth]
            lines += [f"for {inner.var} in range({inner.extent}):"]
            lines += indent(self._backward_scope(inner, depth + 1), 1)
        elif self.root.op in ("operand", "const"):
            lines += self._add(self.root, f"grad[v, {self.out_flat}]")
        else:
            lines.append(f"d{self.root.name} = grad[v, {self.out_flat}]")
        return lines + self._adjoints(scope)

    def _adjoints(self, scope: _Scope) -> list[str]:
        """Every needed value of ``scope`` passing its adjoint to its operands, consumers first."""
        lines: list[str] = []
        for value in reversed(self.values):
            if value.scope is not scope or not self._need[value] or value.op in ("operand", "const"):
                continue
            if value.op == "sum":
                body = value.body
                loop = self._forward_items(body) + self._inits(body)
                loop += self._add(value.children[0], f"d{value.name}") + self._adjoints(body)
                lines += [f"for {body.var} in range({body.extent}):"] + indent(loop, 1)
                continue
            lines += self._propagate(value)
        return lines

    def _propagate(self, value: _Value) -> list[str]:
        d, op, c = f"d{value.name}", value.op, value.children
        names = [x.name for x in c]
        one = self.lit(1)
        if op == "add":
            parts = [(c[0], d), (c[1], d)]
        elif op == "sub":
            parts = [(c[0], d), (c[1], f"-{d}")]
        elif op == "mul":
            parts = [(c[0], f"{d} * {names[1]}"), (c[1], f"{d} * {names[0]}")]
        elif op == "div":
            # torch's order: -grad * ((a / b) / b); a / (b * b) underflows to inf where it stays finite
            parts = [(c[0], f"{d} / {names[1]}"), (c[1], f"-{d} * (({names[0]} / {names[1]}) / {names[1]})")]
        elif op == "neg":
            parts = [(c[0], f"-{d}")]
        elif op == "exp":
            parts = [(c[0], f"{d} * {value.name}")]
        elif op == "tanh":
            parts = [(c[0], f"{d} * ({one} - {value.name} * {value.name})")]
        elif op == "sigmoid":
            parts = [(c[0], f"{d} * ({one} - {value.name}) * {value.name}")]
        elif op == "pow":
            p = self.program[value.step][2]
            slope = f"{self.lit(2)} * {names[0]}" if p == 2 else f"{self.lit(p)} * {names[0]} ** {self.lit(p - 1)}"
            parts = [(c[0], f"{d} * ({slope})")]
        elif op == "leaky_relu":
            s = self.program[value.step][2]
            parts = [(c[0], f"({d} if {names[0]} > 0 else {d} * {self.lit(s)})")]
        else:
            raise ValueError(f"edge expression: no gradient for {op!r}")
        lines = []
        for child, amount in parts:
            lines += self._add(child, amount)
        return lines

    def _add(self, child: _Value, amount: str) -> list[str]:
        if not self._need[child]:
            return []
        if child.op != "operand":
            return [f"d{child.name} += {amount}"]
        k, kind = child.leaf, self.kinds[child.leaf]
        if kind == "shared":
            return [f"partial[{self._offsets[k]} + {child.flat}] += {amount}"]
        return [f"g{k}[{_ROWS[kind]}, {child.flat}] += {amount}"]


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _depth(scope: _Scope) -> int:
    n = 0
    while scope.parent is not None:
        scope, n = scope.parent, n + 1
    return n


def _flat(idx: tuple, shape: tuple) -> str:
    """The flat (row-major) offset of element ``idx`` of a value of per-row ``shape``."""
    terms, stride = [], 1
    for var, n in reversed(list(zip(idx, shape))):
        if n != 1 and var != "0":
            terms.append(var if stride == 1 else f"{var} * {stride}")
        stride *= n
    return " + ".join(reversed(terms)) or "0"


__all__ = ["EdgeProgram", "ROW"]
