"""Differential UDF fuzzer: random user-style UDF programs, compiled vs eager.

Each program is Python SOURCE TEXT (so module-level globals, default
arguments, closures and ``functools.partial`` are real Python), written to a
temporary file and exec'd into a fresh module registered in ``sys.modules``.
It defines ``Model(nn.Module)`` whose ``forward(g, x, C)`` runs message
passing with ``compile=C``, ``make_graph()``, ``leaves(model)`` (plain tensors
that need gradients) and ``rebind(model)`` (rebinds plain tensor attributes,
as users of plain tensors do after an optimizer step).

:func:`run_program` runs the model eagerly (the oracle) and compiled, over
several steps with parameters updated in place and rebound in between, and
compares outputs and gradients w.r.t. node features and every parameter.
Node features are normal, scaled up (large logits), or small integers (ties
for max / min, whose gradient goes to the first tied edge in both executors).
A tied program whose gradients differ is rerun with the ties broken by a
1e-7 jitter: if that run matches, the difference sat on a kink (a sum that is
zero in exact arithmetic, rounded to +-1e-17 or to 0.0 by two summation orders,
then fed to a ReLU) and the outcome is ``kink``, reported apart; if it still
differs, it is a ``mismatch``.

Any other mismatch is measured against eager's own rounding noise by Monte
Carlo arithmetic (Parker, 1997; as in Verificarlo): eager reruns the step with
every rounding operation's result perturbed by a random relative 2**-50 (4
ulps). When compiled differs from eager by no more than those reruns differ
from eager (tensor by tensor), the difference is the problem's own
conditioning at float64 (e.g. softmax gradients at exactly tied logits of
1e5, where eager's eps * 1e8 noise meets the compiled plan's exact 0); the
outcome is ``rounding``, reported apart. A miscompile would have to be smaller
than the effect of 4-ulp perturbations of every operation to hide there.

Both executors get their own copy of the program (module globals included), built from the program's
seed, and each takes real optimizer steps (SGD, SGD with momentum or Adam: ``Program.optimizer``) on its
own gradients between steps; then eager's stepped values are copied into the compiled side's parameters (in
place; its optimizer keeps its own state), so both start each step from the same values. Without that, an
optimizer amplifies rounding noise: Adam turns a gradient that is eager's float64 noise against the plan's
exact 0 into a full step (seed 990002970440), and float32 steps move logits across kinks. A float32
mismatch (the large-graph family) whose float64 twin (the same program in float64) matches is ``rounding``.

Every program says what its compiled run must do (``Program.expect``, see ``EXPECTATIONS``): run at least
one compiled plan and fall back nowhere, fall back (designed to), or run no plan; :func:`unexpected` names
a run that breaks that promise. ``match`` means a compiled plan ran and matched; a run that matched with no
plan at all is ``no_plan``.

Families added later draw whether they apply from their own random streams (``random.Random(f"{name}{seed}")``)
so the programs of other seeds stay as they were: ``family_head_blocks``, ``family_scope_code``,
``family_layers`` (layers in sequence), ``family_partial`` (partial calls and propagation) and
``family_large`` (float32 on graphs large enough for the parallel kernels and the partitioned pair tables).
Generated programs follow DGL's semantics: a reduce UDF is never called on a block without edges, and with
an update only the update's results are written, so they read a reduce's output only where it must exist.

Outcomes: ``match``; ``no_plan``; ``mismatch`` (silent wrong result: the worst); ``kink``; ``rounding``;
``crash`` (compiled raises where eager works); ``fallback`` (a
``FallbackWarning``: allowed, counted by reason); ``both_raise`` and
``eager_error`` (the generated program is invalid even eagerly: skipped).

Used by ``tests/test_udf_fuzz.py`` (CI sample) and ``tests/udf_fuzz_run.py`` (long run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import random
import re
import sys
import tempfile
import traceback
import types
import warnings
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

RTOL, ATOL = 1e-6, 1e-8
RTOL32, ATOL32 = 1e-4, 1e-5  # float32 programs: several summation orders over thousands of edges
WIDTHS = (3, 4)  # few feature widths: numba compiles once per kernel shape

# --------------------------------------------------------------------------- source building


@dataclass
class Weight:
    """A weight a UDF uses: ``linear`` (nn.Linear), ``matrix`` [i, o], ``vector`` [o], ``typed`` [R, i, o]."""

    kind: str
    i: int
    o: int
    r: int = 0
    bias: bool = True


_WHOLE_VIEW = re.compile(r"\b(g\.[ne]data)\b")  # g.ndata / g.edata, not g.ndata_all


class Src:
    """Accumulates the pieces of one program's source."""

    def __init__(self, rng: random.Random, numpy_rng: random.Random):
        self.rng = rng
        self.numpy_rng = numpy_rng  # its own stream: the other draws keep their sequence
        self.header = [
            "import functools",
            "import torch",
            "import torch.nn as nn",
            "import torch.nn.functional as F",
            "import gnnc",
            "import gnnc.function as fn",
            "",
        ]
        self.globals: list[str] = []
        self.init: list[str] = []
        self.fwd: list[str] = []
        self.methods: list[str] = []
        self.funcs: list[str] = []
        self.rebind: list[str] = []
        self.leaves: list[str] = []
        self.tags: list[str] = []
        self.graph: list[str] = []
        self.options: dict = {}  # Program fields a family sets (dtype, threads, expect, ...)
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def scalar(self, value: float) -> str:
        """A python float constant's source, sometimes as a numpy scalar (``np.float32(0.5)``,
        ``np.sqrt(0.25)``), as code ported from numpy writes; ``+ 0.25`` keeps its numpy type."""
        if self.numpy_rng.random() >= NUMPY_SCALAR_SHARE:
            return repr(value)
        self.tag("numpy_scalar")
        if "import numpy as np" not in self.header:
            self.header.insert(len(self.header) - 1, "import numpy as np")
        return self.numpy_rng.choice(
            [f"np.float32({value!r})", f"np.float64({value!r})", f"np.sqrt({value * value!r})"]
        )

    def tag(self, t: str) -> None:
        if t not in self.tags:
            self.tags.append(t)

    def text(self) -> str:
        if self.rng.random() < 0.15:  # some calls eager inside a compiled forward
            self.tag("mixed_compile")
            self.fwd = [
                line.replace("compile=C", "compile=None") if self.rng.random() < 0.4 else line for line in self.fwd
            ]
        if any("random_heterograph" in line for line in self.graph):  # several types: gnnc's whole-graph views
            self.fwd, self.methods, self.funcs = (
                [_WHOLE_VIEW.sub(r"\1_all", line) for line in lines] for lines in (self.fwd, self.methods, self.funcs)
            )
        out = list(self.header)
        out += self.globals + [""]
        out += self.funcs
        out += ["class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
        out += ["        " + line for line in self.init] or []
        out.append("")
        for m in self.methods:
            out += ["    " + line for line in m.splitlines()] + [""]
        out.append("    def forward(self, g, x, C=None):")
        out += ["        " + line for line in self.fwd]
        out.append("")
        out.append("def leaves(model):")
        out.append("    return [" + ", ".join(self.leaves) + "]")
        out.append("")
        out.append("def rebind(model):")
        out += ["    " + line for line in self.rebind] or []
        out.append("    return None")
        out.append("")
        out.append("def make_graph(i=0):")
        out += ["    " + line for line in self.graph]
        return "\n".join(out) + "\n"


def _new_weight_expr(w: Weight, plain_tensor: bool = False) -> str:
    if w.kind == "linear":
        return f"nn.Linear({w.i}, {w.o}, bias={w.bias})"
    shape = {"matrix": f"{w.i}, {w.o}", "vector": f"{w.o}", "typed": f"{w.r}, {w.i}, {w.o}"}[w.kind]
    scale = f" * {1 / (w.i**0.5):.4f}" if w.kind != "vector" else " * 0.5"
    if plain_tensor:
        return f"(torch.randn({shape}){scale}).requires_grad_()"
    return f"nn.Parameter(torch.randn({shape}){scale})"


def apply_weight(rng, w: Weight, ref: str, x: str) -> str:
    """Expression applying weight ``ref`` to ``x`` (``x`` has width w.i in its last dim)."""
    if w.kind == "linear":
        return f"{ref}({x})"
    if w.kind == "matrix":
        return rng.choice([f"{x} @ {ref}", f"torch.matmul({x}, {ref})"])
    if w.kind in ("vector", "scalar"):
        return f"{x} * {ref}"
    raise ValueError(w.kind)


class Binder:
    """Decides where weights live and how a UDF in a given placement reaches them."""

    # placements of a UDF: method of the model, nested def / lambda in forward, default args,
    # module-level function over globals, functools.partial of a module-level function
    PLACEMENTS = ("method", "nested", "lambda", "default", "global", "partial")

    def __init__(self, src: Src):
        self.src = src
        self.containers: dict[str, str] = {}

    def model_attr(self, w: Weight, base: str) -> str:
        """Register ``w`` on the model in a random way; expression valid in forward and methods (self.)."""
        rng, src = self.src.rng, self.src
        name = src.name(base)
        if w.kind == "scalar":  # a python float attribute, changed between steps (temperature, slope)
            src.tag("scalar_attr")
            src.init.append(f"self.{name} = {src.scalar(rng.choice([0.5, 0.7, 1.5]))}")
            src.rebind.append(f"model.{name} = model.{name} + 0.25")
            return f"self.{name}"
        how = rng.choice(["attr", "attr", "moduledict", "modulelist", "pydict", "tensor_attr"])
        if w.kind != "linear" and how in ("moduledict", "modulelist"):
            how = rng.choice(["attr", "pydict", "tensor_attr"])
        if w.kind == "linear" and how == "tensor_attr":
            how = "attr"
        src.tag(f"store:{how}")
        if how == "attr":
            src.init.append(f"self.{name} = {_new_weight_expr(w)}")
            return f"self.{name}"
        if how == "tensor_attr":
            src.init.append(f"self.{name} = {_new_weight_expr(w, plain_tensor=True)}")
            src.leaves.append(f"model.{name}")
            src.rebind.append(
                f"model.{name} = (model.{name}.detach() + 0.05 * torch.randn_like(model.{name})).requires_grad_()"
            )
            return f"self.{name}"
        if how == "moduledict":
            if "md" not in self.containers:
                src.init.append("self.md = nn.ModuleDict()")
                self.containers["md"] = "md"
            src.init.append(f"self.md['{name}'] = {_new_weight_expr(w)}")
            return f"self.md['{name}']"
        if how == "modulelist":
            if "ml" not in self.containers:
                src.init.append("self.ml = nn.ModuleList()")
                self.containers["ml"] = "ml"
            src.init.append(f"self.ml.append({_new_weight_expr(w)})")
            idx = sum(1 for line in src.init if line.startswith("self.ml.append(")) - 1
            return f"self.ml[{idx}]"
        # plain dict: not registered, so the leaves come from leaves(model)
        if "pd" not in self.containers:
            src.init.append("self.pd = {}")
            self.containers["pd"] = "pd"
        src.init.append(f"self.pd['{name}'] = {_new_weight_expr(w)}")
        if w.kind == "linear":
            src.leaves.append(f"*model.pd['{name}'].parameters()")
        else:
            src.leaves.append(f"model.pd['{name}']")
        return f"self.pd['{name}']"

    def global_weight(self, w: Weight, base: str) -> str:
        rng, src = self.src.rng, self.src
        name = src.name("G" + base)
        if w.kind == "scalar":
            src.tag("scalar_global")
            src.globals.append(f"{name} = {src.scalar(rng.choice([0.5, 0.7, 1.5]))}")
            src.rebind.append(f"globals()['{name}'] = {name} + 0.25")
            return name
        plain = w.kind != "linear" and rng.random() < 0.4
        src.globals.append(f"{name} = {_new_weight_expr(w, plain_tensor=plain)}")
        if plain and rng.random() < 0.5:
            src.tag("global_tensor_rebound")
            src.rebind.append(
                f"globals()['{name}'] = ({name}.detach() + 0.05 * torch.randn_like({name})).requires_grad_()"
            )
        src.tag("store:global_tensor" if plain else "store:global_param")
        src.leaves.append(f"*{name}.parameters()" if w.kind == "linear" else name)
        return name

    def derived(self, w: Weight, ref: str) -> str | None:
        """Maybe a tensor computed in forward from ``ref`` (matrix/typed only): closure-captured value."""
        rng, src = self.src.rng, self.src
        if w.kind not in ("matrix", "typed", "scalar") or rng.random() < 0.5:
            return None
        local = src.name("d")
        if w.kind == "scalar":
            src.fwd.append(f"{local} = {ref} * 2.0")
            src.tag("derived:scalar")
        elif w.kind == "matrix":
            form = rng.choice(["view", "mul", "t2"])
            if form == "view":
                src.fwd.append(f"{local} = {ref}.view(-1, {w.o})")
            elif form == "mul":
                src.fwd.append(f"{local} = {ref} * 1.0")
            else:
                src.fwd.append(f"{local} = {ref}.t().contiguous().t()")
            src.tag(f"derived:{form}")
        else:
            src.fwd.append(f"{local} = {ref}.view({w.r}, {w.i}, {w.o})")
            src.tag("derived:view3")
        return local


def basis_typed(src: Src, binder: Binder, r: int, i: int, o: int) -> str:
    """Basis-decomposed typed weight computed in forward (DGL RelGraphConv 'basis'); a local name."""
    b = src.rng.choice([1, 2])
    basis = binder.model_attr(Weight("matrix", b, i * o), "basis")
    comp = binder.model_attr(Weight("matrix", r, b), "comp")
    local = src.name("wb")
    src.fwd.append(f"{local} = torch.matmul({comp}, {basis}).view({r}, {i}, {o})")
    src.tag("basis")
    return local


def render_udf(
    src: Src,
    binder: Binder,
    placement: str,
    arg: str,
    body: list[tuple[str, str]],
    ret: str,
    weights: list[tuple[str, Weight]],
    base: str,
) -> str:
    """Define one UDF; return the expression naming it in forward.

    ``body`` is ``[(var, expr)]`` and ``ret`` the returned dict expression; ``{W0}``... in them are
    weight placeholders (``weights`` lists placeholder -> Weight).
    """
    rng = src.rng
    name = src.name(base)
    refs: dict[str, str] = {}
    params: list[str] = []  # extra keyword parameters (default / partial)
    partial_kw: list[str] = []
    for ph, w in weights:
        if isinstance(w, str):  # a forward-local tensor name (basis, derived) given directly
            local = w
            if placement in ("method", "global"):
                placement = "nested"
            if placement in ("default",):
                refs[ph] = ph.lower()
                params.append(f"{ph.lower()}={local}")
            elif placement == "partial":
                refs[ph] = ph.lower()
                partial_kw.append(f"{ph.lower()}={local}")
            else:
                refs[ph] = local
            continue
        if placement == "global":
            refs[ph] = binder.global_weight(w, "W")
            continue
        ref = binder.model_attr(w, "W")
        if placement == "method":
            refs[ph] = ref
            continue
        d = binder.derived(w, ref)
        if placement in ("nested", "lambda"):
            if d is not None:
                refs[ph] = d
            elif rng.random() < 0.5:
                local = src.name("w")
                src.fwd.append(f"{local} = {ref}")
                refs[ph] = local
            else:
                refs[ph] = ref  # closure over self
        elif placement == "default":
            refs[ph] = ph.lower()
            params.append(f"{ph.lower()}={d or ref}")
        else:  # partial
            refs[ph] = ph.lower()
            partial_kw.append(f"{ph.lower()}={d or ref}")
    src.tag(f"udf:{placement}")

    def fill(s: str) -> str:
        for ph, r in refs.items():
            s = s.replace("{" + ph + "}", r)
        return s

    body = [(v, fill(e)) for v, e in body]
    ret = fill(ret)
    # a helper function called from the UDF for the whole return value
    helper = None
    if placement != "lambda" and rng.random() < 0.15:
        helper = src.name("_helper")
        src.tag("helper")
    lines = [f"{v} = {e}" for v, e in body]
    if helper:
        free = sorted(set(re.findall(r"\b(?:[tq]\d+)\b", ret)))
        if rng.random() < 0.4 and "'" in ret:  # the helper scales by a global float changed between steps
            gs = src.name("HS")
            src.globals.append(f"{gs} = 1.5")
            src.rebind.append(f"globals()['{gs}'] = {gs} + 0.25")
            src.tag("helper_global_scalar")
            ret = re.sub(r"(: )([tq]\d+)", rf"\1\2 * {gs}", ret)
        src.funcs += [f"def {helper}({', '.join(free)}):", f"    return {ret}", ""]
        ret = f"{helper}({', '.join(free)})"
    if placement == "method":
        src.methods.append(
            "\n".join([f"def {name}(self, {arg}):"] + ["    " + line for line in lines] + [f"    return {ret}"])
        )
        return f"self.{name}"
    if placement in ("global", "partial"):
        sig = ", ".join([arg] + [p for p in (kw.split("=")[0] for kw in partial_kw)])
        src.funcs += [f"def {name}({sig}):"] + ["    " + line for line in lines] + [f"    return {ret}", ""]
        if placement == "partial":
            local = src.name("p")
            src.fwd.append(f"{local} = functools.partial({name}, {', '.join(partial_kw)})")
            return local
        return name
    if placement == "lambda":
        expr = ret
        for v, e in reversed(body):
            expr = re.sub(rf"\b{v}\b", lambda _m, e=e: f"({e})", expr)
        for v, e in reversed(body):  # nested temporaries
            expr = re.sub(rf"\b{v}\b", lambda _m, e=e: f"({e})", expr)
        src.fwd.append(f"{name} = lambda {arg}: {expr}")
        return name
    sig = ", ".join([arg] + params)
    src.fwd += [f"def {name}({sig}):"] + ["    " + line for line in lines] + [f"    return {ret}"]
    return name


# --------------------------------------------------------------------------- expression chains

UNARY = [
    "torch.tanh({a})",
    "torch.sigmoid({a})",
    "torch.relu({a})",
    "F.leaky_relu({a}, 0.2)",
    "torch.exp(torch.tanh({a}))",
    "({a} * 0.5)",
    "F.elu({a})",
    "(-{a})",
    "({a} * 1.0).clamp_(-3.0, 3.0)",
    "F.leaky_relu({a} + 0.0, 0.1, inplace=True)",
]  # in place, on a fresh tensor
BINARY = [
    "({a} + {b})",
    "({a} * {b})",
    "({a} - {b})",
    "({a} / (1.0 + {b}.abs()))",
    "torch.maximum({a}, {b})",
    "({a} / (1.0 + torch.sigmoid({b})))",
]


def chain(rng, operands: list[str], steps: int, start: list[str] | None = None) -> str:
    """A random elementwise expression over ``operands`` (broadcastable), starting from one of ``start``."""
    expr = rng.choice(start or operands)
    for _ in range(steps):
        if rng.random() < 0.5:
            expr = rng.choice(UNARY).format(a=expr)
        else:
            other = rng.choice(operands)
            a, b = (expr, other) if rng.random() < 0.5 else (other, expr)
            expr = rng.choice(BINARY).format(a=a, b=b)
    return expr


# --------------------------------------------------------------------------- graphs


def graph_lines(rng, hetero: bool) -> list[str]:
    if hetero:
        sizes = {"user": rng.randint(2, 10), "item": rng.randint(1, 8), "tag": 1}
        epr = rng.choice([0, 3, 10, 10, 25, 25])
        return [
            "from tests.graphs import random_heterograph",
            f"return random_heterograph({rng.randint(0, 10**6)} + i, sizes={sizes!r}, "
            f"edges_per_relation={epr} + i * {rng.choice([0, 0, 3])})",
        ]
    shape = rng.random()
    if shape < 0.07:
        return ["return gnnc.graph(([0], [0]), num_nodes=1)"]
    if shape < 0.1:
        return ["return gnnc.graph(([], []), num_nodes=1)"]
    if shape < 0.15:
        return [f"return gnnc.graph(([], []), num_nodes={rng.randint(2, 6)})"]
    n, m = rng.randint(2, 20), rng.randint(1, 60)
    grow = rng.choice([0, 0, 1, 3])  # a later step may run on another graph of the same schema
    return [
        "from tests.graphs import random_homograph",
        f"return random_homograph({n} + i * {grow}, {m} + i * {grow}, {rng.randint(0, 10**6)} + i * {grow})",
    ]


# --------------------------------------------------------------------------- families


def _msg_body(rng, d, weights, allow_edge=True):
    """Message body: (body, outputs {key: var}, weights). Messages of width d."""
    ops = ["edges.src['h']"]
    if rng.random() < 0.6:
        ops.append("edges.dst['h']")
    body = []
    if rng.random() < 0.2:  # concat of both ends through one linear (concat split)
        w = Weight(rng.choice(["linear", "matrix"]), 2 * d, d, bias=rng.random() < 0.5)
        ph = f"W{len(weights)}"
        weights.append((ph, w))
        body.append(("t0", "torch.cat([edges.src['h'], edges.dst['h']], " + rng.choice(["-1", "1", "dim=1"]) + ")"))
        body.append(("t1", apply_weight(rng, w, "{" + ph + "}", "t0")))
        ops.append("t1")
    elif rng.random() < 0.6:
        w = Weight(rng.choice(["linear", "matrix"]), d, d, bias=rng.random() < 0.5)
        ph = f"W{len(weights)}"
        weights.append((ph, w))
        body.append(("t1", apply_weight(rng, w, "{" + ph + "}", rng.choice(ops))))
        ops.append("t1")
    if allow_edge and rng.random() < 0.4:
        ops.append("edges.data['w']")
    if rng.random() < 0.2:
        w = Weight("vector", d, d)
        ph = f"W{len(weights)}"
        weights.append((ph, w))
        ops.append("(edges.src['h'] * {" + ph + "})")
    start = [o for o in ops if "edges.data" not in o]
    expr = chain(rng, ops, rng.randint(0, 3), start)
    if rng.random() < 0.25:  # a python float (temperature / slope) the UDF reads
        ph = f"W{len(weights)}"
        weights.append((ph, Weight("scalar", 0, 0)))
        expr = rng.choice(["({e}) * {s}", "{s} * ({e})", "F.leaky_relu({e}, {s} * 0.1)", "({e}) / {s}"]).format(
            e=expr, s="{" + ph + "}"
        )
    body.append(("t2", expr))
    if rng.random() < 0.1:  # an in-place add seen through a second name (eager: both names see it)
        src_tag = rng.choice(["edges.src['h']", "edges.dst['h']"])
        body += [("q1", "t2 * 1.0"), ("q2", "q1"), ("q3", f"q1.add_({src_tag})"), ("q4", "q2 * 2.0 + q3")]
        return body, "q4"
    return body, "t2"


def _reduce_stmt(rng, box: str) -> str:
    return rng.choice(
        [
            f"{box}.sum(1)",
            f"{box}.mean(1)",
            f"{box}.max(1).values",
            f"torch.max({box}, 1)[0]",
            f"{box}.min(1).values",
            f"torch.sum({box}, dim=1)",
            f"torch.mean({box}, dim=1)",
        ]
    )


def _begin(src: Src, family: str, hetero_p: float) -> tuple[random.Random, int]:
    """Common start of a family: input width ``d``, the graph (heterogeneous with probability
    ``hetero_p``) and ``g.ndata['h'] = x``."""
    rng = src.rng
    d = rng.choice(WIDTHS)
    src.globals.append(f"#WIDTH {d}")
    src.tag(f"fam:{family}")
    src.graph = graph_lines(rng, hetero=rng.random() < hetero_p)
    src.fwd.append("g.ndata['h'] = x")
    return rng, d


def family_homo(src: Src, binder: Binder) -> None:
    """update_all with UDF message / reduce / update on a homogeneous graph."""
    rng, d = _begin(src, "homo", 0.15)
    w_edge = rng.choice([1, d])
    src.fwd.append(
        f"g.edata['w'] = torch.rand(g.num_edges(), {w_edge}, generator=torch.Generator().manual_seed(3)) + 0.1"
    )
    weights: list = []
    body, out = _msg_body(rng, d, weights)
    msg_keys = {"m": out}
    softmax = rng.random() < 0.3
    if softmax:
        body.append(
            (
                "t3",
                rng.choice(
                    [
                        "(t2 * edges.dst['h']).sum(-1, keepdim=True)",
                        "F.leaky_relu((edges.src['h'] + edges.dst['h']).sum(-1, keepdim=True))",
                        "t2",
                    ]
                ),
            )
        )
        msg_keys["e"] = "t3"
    ret = "{" + ", ".join(f"'{k}': {v}" for k, v in msg_keys.items()) + "}"
    placement = rng.choice(Binder.PLACEMENTS)
    if placement == "method" and rng.random() < 0.3:
        body.append(("t2", "t2 * (2.0 if self.training else 0.5)"))
        src.rebind.append("model.train(not model.training)")
        src.tag("training_flag")
    msg = render_udf(src, binder, placement, "edges", body, ret, weights, "message")

    # reduce
    rweights: list = []
    out_key = rng.choice(["o", "h"])  # 'h': overwrites the feature it may read
    if out_key == "h":
        src.tag("overwrite")
    if softmax:
        rbody = [
            ("t1", "torch.softmax(nodes.mailbox['e'], dim=1)"),
            ("t2", "torch.sum(t1 * nodes.mailbox['m'], dim=1)"),
        ]
        src.tag("mailbox_softmax")
    else:
        rbody = [("t2", _reduce_stmt(rng, "nodes.mailbox['m']"))]
    form = rng.random()
    if form < 0.3:
        w = Weight(rng.choice(["linear", "matrix"]), 2 * d, d)
        rweights.append(("W0", w))
        rbody.append(("t3", "torch.relu(" + apply_weight(rng, w, "{W0}", "torch.cat([nodes.data['h'], t2], -1)") + ")"))
        src.tag("reduce_cat_self")
    elif form < 0.5:
        rbody.append(("t3", chain(rng, ["nodes.data['h']", "t2"], rng.randint(1, 2))))
    else:
        rbody.append(("t3", "t2"))
    red_ret = "{" + f"'{out_key}': t3" + "}"
    use_builtin_red = not softmax and rng.random() < 0.2
    if use_builtin_red:
        red = f"fn.{rng.choice(['sum', 'mean', 'max', 'min'])}('m', '{out_key}')"
        src.tag("builtin_reduce")
    else:
        red = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "nodes", rbody, red_ret, rweights, "reduce")
    upd = None
    if rng.random() < 0.3:
        uweights: list = []
        ubody = [
            (
                "t1",
                chain(
                    rng,
                    [f"nodes.data['{out_key}']", "nodes.data['h']" if out_key != "h" else f"nodes.data['{out_key}']"],
                    rng.randint(1, 2),
                ),
            )
        ]
        if rng.random() < 0.4:
            w = Weight("linear", d, d)
            uweights.append(("W0", w))
            ubody.append(("t2", "{W0}(t1)"))
        else:
            ubody.append(("t2", "t1"))
        upd = render_udf(
            src,
            binder,
            rng.choice(Binder.PLACEMENTS),
            "nodes",
            ubody,
            "{" + f"'{out_key}': t2" + "}",
            uweights,
            "update",
        )
        src.tag("update")
    kw = rng.random() < 0.3
    if upd is None:
        src.fwd.append(f"g.update_all({msg}, {red}, compile=C)")
    elif kw:
        src.fwd.append(f"g.update_all({msg}, {red}, update={upd}, compile=C)")
    else:
        src.fwd.append(f"g.update_all({msg}, {red}, {upd}, compile=C)")
    src.fwd.append(f"return g.ndata['{out_key}']")


def family_gat(src: Src, binder: Binder) -> None:
    """DGL two-call attention: apply_edges(edge_attention) then update_all with a softmax reduce."""
    rng, d = _begin(src, "gat", 0.0)
    heads = rng.choice([1, 1, 2])
    if heads > 1:
        src.tag("fam:gat_mh")
    fc = binder.model_attr(Weight("linear", d, d * heads, bias=False), "fc")
    if heads == 1:
        src.fwd.append(f"z = {fc}(x)")
        src.fwd.append("g.ndata['z'] = z")
        weights = [("W0", Weight("linear", 2 * d, 1, bias=False))]
        body = [
            ("t1", "torch.cat([edges.src['z'], edges.dst['z']], dim=1)"),
            ("t2", "{W0}(t1)"),
            ("t3", "F.leaky_relu(t2)" if rng.random() < 0.7 else "F.leaky_relu(t2, 0.2)"),
        ]
        ea = render_udf(
            src, binder, rng.choice(Binder.PLACEMENTS), "edges", body, "{'e': t3}", weights, "edge_attention"
        )
    else:
        src.fwd.append(f"z = {fc}(x).view(-1, {heads}, {d})")
        src.fwd.append("g.ndata['z'] = z")
        al = binder.model_attr(Weight("typed", d, 1, r=heads), "attn_l")  # [H, d, 1] -> use as [1,H,d]
        ar = binder.model_attr(Weight("typed", d, 1, r=heads), "attn_r")
        src.fwd.append(f"g.ndata['el'] = (z * {al}.view(1, {heads}, {d})).sum(dim=-1, keepdim=True)")
        src.fwd.append(f"g.ndata['er'] = (z * {ar}.view(1, {heads}, {d})).sum(dim=-1, keepdim=True)")
        if rng.random() < 0.5:
            src.fwd.append("g.apply_edges(fn.u_add_v('el', 'er', 'e0'), compile=C)")
            body = [("t1", "F.leaky_relu(edges.data['e0'], 0.2)")]
            ea = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "edges", body, "{'e': t1}", [], "leaky")
            src.tag("builtin_apply_edges")
        else:
            body = [("t1", "F.leaky_relu(edges.src['el'] + edges.dst['er'], 0.2)")]
            ea = render_udf(
                src, binder, rng.choice(Binder.PLACEMENTS), "edges", body, "{'e': t1}", [], "edge_attention"
            )
    src.fwd.append(f"g.apply_edges({ea}, compile=C)")
    mbody = [("t1", "edges.src['z']"), ("t2", "edges.data['e']")]
    mf = render_udf(
        src, binder, rng.choice(Binder.PLACEMENTS), "edges", mbody, "{'z': t1, 'e': t2}", [], "message_func"
    )
    rbody = [("t1", "F.softmax(nodes.mailbox['e'], dim=1)"), ("t2", "torch.sum(t1 * nodes.mailbox['z'], dim=1)")]
    if heads > 1 and rng.random() < 0.5:
        rbody.append(("t3", "t2.flatten(1)"))
    else:
        rbody.append(("t3", "t2"))
    rf = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "nodes", rbody, "{'h': t3}", [], "reduce_func")
    src.tag("overwrite")
    src.fwd.append(f"g.update_all({mf}, {rf}, compile=C)")
    src.fwd.append("return g.ndata['h']")
    if rng.random() < 0.3:  # also return the attention logits (edge output)
        src.fwd[-1] = "return g.ndata['h'], g.edata['e']"


BUILTIN_BIN = ["add", "sub", "mul", "div", "dot"]


def family_builtin(src: Src, binder: Binder) -> None:
    """gnnc.function built-ins, possibly after an apply_edges producing the edge operand."""
    rng, d = _begin(src, "builtin", 0.2)
    proj = rng.random() < 0.5
    if proj:
        W = binder.model_attr(Weight("linear", d, d), "proj")
        src.fwd.append(f"g.ndata['p'] = {W}(x)")
    else:
        src.fwd.append("g.ndata['p'] = torch.tanh(x)")
    ew = rng.choice([1, d])
    if rng.random() < 0.4:
        weights: list = []
        body = [
            (
                "t1",
                "torch.sigmoid((edges.src['h'] * edges.dst['p']).sum(-1, keepdim=True))"
                if ew == 1
                else "torch.sigmoid(edges.src['h'] - edges.dst['p'])",
            )
        ]
        ae = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "edges", body, "{'w': t1}", weights, "edge_w")
        src.fwd.append(f"g.apply_edges({ae}, compile=C)")
        src.tag("apply_edges_chain")
    else:
        src.fwd.append(
            f"g.edata['w'] = torch.rand(g.num_edges(), {ew}, generator=torch.Generator().manual_seed(5)) + 0.1"
        )
    kind = rng.random()
    if kind < 0.25:
        m = rng.choice(["fn.copy_u('p', 'm')", "fn.copy_e('w', 'm')", "fn.copy_src('h', 'm')"])
    else:
        lhs, rhs = rng.sample(["u", "v", "e"], 2)
        op = rng.choice(BUILTIN_BIN)
        field = {"u": "h", "v": "p", "e": "w"}
        if op == "div" and rhs != "e":
            rhs = "e"
            if lhs == "e":
                lhs = "u"
        if op == "dot" and "e" in (lhs, rhs) and ew == 1:
            op = "mul"
        m = f"fn.{lhs}_{op}_{rhs}('{field[lhs]}', '{field[rhs]}', 'm')"
    src.tag("builtin_msg:" + m.split("(")[0][3:])
    if rng.random() < 0.75:
        r = f"fn.{rng.choice(['sum', 'mean', 'max', 'min'])}('m', 'o')"
    else:
        r = render_udf(
            src,
            binder,
            rng.choice(Binder.PLACEMENTS),
            "nodes",
            [("t1", _reduce_stmt(rng, "nodes.mailbox['m']"))],
            "{'o': t1}",
            [],
            "reduce",
        )
    src.fwd.append(f"g.update_all({m}, {r}, compile=C)")
    src.fwd.append("return g.ndata['o']")


def family_typed(src: Src, binder: Binder) -> None:
    """Typed gathers: ``weight[edges.data['rel_type']]`` with bmm, ``emb[nodes.data['type']]``, DGL RGCN forms."""
    rng, d = _begin(src, "typed", 0.0)
    o = rng.choice(WIDTHS)
    R, T = rng.randint(1, 4), rng.randint(1, 3)
    src.fwd.append("gen = torch.Generator().manual_seed(11)")
    src.fwd.append(f"g.edata['rel_type'] = torch.randint(0, {R}, (g.num_edges(),), generator=gen)")
    src.fwd.append("g.edata['norm'] = torch.rand(g.num_edges(), 1, generator=gen) + 0.1")
    src.fwd.append(f"g.ndata['type'] = torch.randint(0, {T}, (g.num_nodes(),), generator=gen)")
    form = rng.choice(["bmm", "bmm", "embed_index", "basis_bmm", "closure_types"])
    placement = rng.choice(Binder.PLACEMENTS)
    if form == "basis_bmm":
        wref: object = basis_typed(src, binder, R, d, o)
        weights = [("W0", wref)]
    elif form == "embed_index":
        # DGL entity-classify first layer: embed = weight.view(-1, out); embed[rel_type * in + src id]
        raw = binder.model_attr(Weight("typed", d, o, r=R), "weight")
        local = src.name("embed")
        src.fwd.append(f"{local} = {raw}.view(-1, {o})")
        src.fwd.append(f"g.ndata['id'] = torch.arange(g.num_nodes()) % {d}")
        weights = [("W0", local)]
        src.tag("embed_view")
    elif form == "closure_types":
        # DGL 0.5's RelGraphConv: the edge types reach the UDF from forward (functools.partial), one per edge id
        local = src.name("etypes")
        src.fwd.append(f"{local} = g.edata['rel_type'].clone()")
        weights = [("W0", Weight("typed", d, o, r=R)), ("T0", local)]
    else:
        weights = [("W0", Weight("typed", d, o, r=R))]
    if form == "embed_index":
        body = [("t1", f"edges.data['rel_type'] * {d} + edges.src['id']"), ("t2", "{W0}[t1]")]
    else:
        index = "{T0}" if form == "closure_types" else "edges.data['rel_type']"
        body = [
            ("t1", "{W0}.index_select(0, " + index + ")" if form == "closure_types" else "{W0}[" + index + "]"),
            (
                "t2",
                rng.choice(
                    [
                        "torch.bmm(edges.src['h'].unsqueeze(1), t1).squeeze(1)",
                        "torch.matmul(edges.src['h'].unsqueeze(1), t1).squeeze(1)",
                        "(edges.src['h'].unsqueeze(-1) * t1).sum(1)",
                    ]
                ),
            ),
        ]
    branch = rng.random()
    if branch < 0.4:
        body.append(("t3", "t2 * edges.data['norm']"))
    elif branch < 0.6:  # DGL's RelGraphConv: branches on the features the graph holds, resolved per graph
        body.append(("t3", "t2 * edges.data['norm'] if 'norm' in edges.data and edges.src['h'].dim() == 2 else t2"))
        src.tag("feature_branch")
    else:
        body.append(("t3", "t2"))
    msg = render_udf(src, binder, placement, "edges", body, "{'msg': t3}", weights, "message")
    src.tag(f"typed:{form}")
    rweights: list = []
    rbody = [("t1", _reduce_stmt(rng, "nodes.mailbox['msg']"))]
    if rng.random() < 0.5:
        rweights.append(("E0", Weight("typed", 1, o, r=T)))
        rbody.append(("t2", f"t1 + {{E0}}[nodes.data['type']].view(-1, {o})"))
        src.tag("typed:emb_node")
    else:
        rbody.append(("t2", "t1"))
    if rng.random() < 0.3:
        red = "fn.sum('msg', 'o')"
    else:
        red = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "nodes", rbody, "{'o': t2}", rweights, "reduce")
    src.fwd.append(f"g.update_all({msg}, {red}, compile=C)")
    src.fwd.append("return g.ndata['o']")


def family_hetero(src: Src, binder: Binder) -> None:
    """multi_update_all with per-relation (message, reduce) made in a loop: default args, partial, closures."""
    rng, d = _begin(src, "hetero", 1.0)
    rels = [
        "('user', 'likes', 'item')",
        "('item', 'tagged', 'tag')",
        "('tag', 'empty', 'user')",
        "('user', 'follows', 'user')",
        "('item', 'liked_by', 'user')",
    ]
    chosen = [r for r in rels if rng.random() < 0.7] or [rels[3]]
    src.fwd.append(f"rels = [{', '.join(chosen)}]")
    n = len(chosen)
    store = rng.choice(["modulelist", "moduledict", "param3", "global_list"])
    src.tag(f"hetero_store:{store}")
    if store == "modulelist":
        src.init.append(f"self.W = nn.ModuleList([nn.Linear({d}, {d}) for _ in range({n})])")
        acc = "self.W[k]({x})"
    elif store == "moduledict":
        src.init.append(f"self.W = nn.ModuleDict({{str(i): nn.Linear({d}, {d}) for i in range({n})}})")
        acc = "self.W[str(k)]({x})"
    elif store == "param3":
        src.init.append(f"self.W = nn.Parameter(torch.randn({n}, {d}, {d}) * 0.5)")
        acc = "{x} @ self.W[k]"
    else:
        src.globals.append(f"GW = [nn.Linear({d}, {d}) for _ in range({n})]")
        src.leaves.append("*[p for m in GW for p in m.parameters()]")
        acc = "GW[k]({x})"
    style = rng.choice(["default", "default", "lambda_default", "partial", "factory", "builtin_feature", "etype"])
    src.tag(f"hetero_style:{style}")
    xin = rng.choice(["edges.src['h']", "edges.src['h'] * edges.dst['h']", "torch.tanh(edges.src['h'])"])
    m_expr = acc.format(x=xin)
    red_choice = rng.random()
    if red_choice < 0.4:
        red = "fn.sum('m', 'o')" if rng.random() < 0.5 else f"fn.{rng.choice(['mean', 'max', 'min'])}('m', 'o')"
        red_def = []
    else:
        rexpr = _reduce_stmt(rng, "nodes.mailbox['m']")
        red_def = ["def reduce(nodes):", f"    return {{'o': {rexpr}}}"]
        red = "reduce"
    src.fwd += red_def
    src.fwd.append("funcs = {}")
    if style == "default":
        src.fwd += [
            "for k, rel in enumerate(rels):",
            "    def message(edges, k=k):",
            f"        return {{'m': {m_expr}}}",
            f"    funcs[rel] = (message, {red})",
        ]
    elif style == "lambda_default":
        src.fwd += ["for k, rel in enumerate(rels):", f"    funcs[rel] = (lambda edges, k=k: {{'m': {m_expr}}}, {red})"]
    elif style == "partial":
        gname = src.name("rel_message")
        m_g = m_expr.replace("self.", "model.")
        src.funcs += [f"def {gname}(edges, model, k):", f"    return {{'m': {m_g}}}", ""]
        src.fwd += [
            "for k, rel in enumerate(rels):",
            f"    funcs[rel] = (functools.partial({gname}, model=self, k=k), {red})",
        ]
    elif style == "factory":
        src.fwd += [
            "def make(k):",
            "    def message(edges):",
            f"        return {{'m': {m_expr}}}",
            "    return message",
            "for k, rel in enumerate(rels):",
            f"    funcs[rel] = (make(k), {red})",
        ]
    elif style == "etype":  # one call per relation with etype=, an apply_edges edge weight first
        src.fwd += [
            "outs = []",
            "for k, rel in enumerate(rels):",
            "    def edge_w(edges, k=k):",
            "        return {'a': torch.sigmoid((" + m_expr + " * edges.dst['h']).sum(-1, keepdim=True))}",
            "    g.apply_edges(edge_w, etype=rel, compile=C)",
            f"    g.update_all(fn.u_mul_e('h', 'a', 'm'), {red}, etype=rel, compile=C)",
            "    outs.append(g.nodes[rel[2]].data['o'])",
            "return tuple(outs)",
        ]
        return
    else:  # DGL heterograph tutorial: per-relation projected features read by fn.copy_u
        xproj = acc.format(x="x")
        src.fwd += [
            "for k, rel in enumerate(rels):",
            f"    g.ndata['Wh_%s' % rel[1]] = {xproj}",
            f"    funcs[rel] = (fn.copy_u('Wh_%s' % rel[1], 'm'), {red})",
        ]
    cross = rng.choice(["sum", "mean", "max", "min", "stack"])
    src.fwd.append(f"g.multi_update_all(funcs, {cross!r}, compile=C)")
    src.fwd.append("dst = sorted({rel[2] for rel in rels})")
    src.fwd.append("return tuple(g.nodes[t].data['o'] for t in dst)")


def family_relational(src: Src, binder: Binder) -> None:
    """Per-relation weights in ``g.etype_data`` read as ``edges.type[...]``: R-GCN, RGAT and HGT forms
    (compact materialization, linear reordering and the typed aggregation orders)."""
    rng, d = _begin(src, "relational", 1.0)
    R, heads = 5, rng.choice([1, 2])
    dh = rng.choice([2, 3])
    kind = rng.choice(["rgcn", "rgat", "hgt"])
    src.tag(f"relational:{kind}")
    mm = rng.choice(
        [
            "torch.bmm({x}.unsqueeze(1), {w}).squeeze(1)",
            "torch.matmul({x}.unsqueeze(1), {w}).squeeze(1)",
            "({x}.unsqueeze(1) @ {w}).squeeze(1)",
        ]
    )
    if kind == "rgcn":
        w = binder.model_attr(Weight("typed", d, d, r=R), "W")
        src.fwd.append(f"g.etype_data['W'] = {w}")
        src.fwd.append("g.edata['norm'] = torch.rand(g.num_edges(), 1, generator=torch.Generator().manual_seed(3))")
        m = mm.format(x=rng.choice(["edges.src['h']", "edges.dst['h']"]), w="edges.type['W']")
        body = [("t1", m), ("t2", rng.choice(["t1 * edges.data['norm']", "t1"]))]
        ret = "{'m': t2}"
        rbody = [("t1", rng.choice(["nodes.mailbox['m'].sum(1)", "torch.mean(nodes.mailbox['m'], dim=1)"]))]
    elif kind == "rgat":
        w = binder.model_attr(Weight("typed", d, heads * dh, r=R), "W")
        a = binder.model_attr(Weight("typed", heads, 2 * dh, r=R), "attn")
        src.fwd += [f"g.etype_data['W'] = {w}", f"g.etype_data['a'] = {a}"]
        zs = mm.format(x="edges.src['h']", w="edges.type['W']") + f".view(-1, {heads}, {dh})"
        zd = mm.format(x="edges.dst['h']", w="edges.type['W']") + f".view(-1, {heads}, {dh})"
        body = [
            ("t1", zs),
            ("t2", zd),
            ("t3", "F.leaky_relu(torch.sum(torch.cat([t1, t2], dim=-1) * edges.type['a'], dim=-1), 0.2)"),
        ]
        ret = "{'e': t3, 'z': t1}"
        rbody = [
            ("t1", "torch.softmax(nodes.mailbox['e'], dim=1)"),
            ("t2", "torch.sum(t1.unsqueeze(-1) * nodes.mailbox['z'], dim=1).flatten(1)"),
        ]
    else:
        k = binder.model_attr(Weight("linear", d, heads * dh, bias=False), "k")
        q = binder.model_attr(Weight("linear", d, heads * dh, bias=False), "q")
        watt = binder.model_attr(Weight("typed", heads * dh, dh, r=R), "Watt")
        pri = binder.model_attr(Weight("typed", heads, 1, r=R), "pri")  # HGT's priority per relation and head
        src.fwd += [
            f"g.ndata['k'] = {k}(x).view(-1, {heads}, 1, {dh})",
            f"g.ndata['q'] = {q}(x).view(-1, {heads}, {dh})",
            f"g.etype_data['Watt'] = {watt}.view({R}, {heads}, {dh}, {dh})",
            f"g.etype_data['pri'] = {pri}.view({R}, {heads})",
        ]
        body = [
            ("t1", "torch.matmul(edges.src['k'], edges.type['Watt']).squeeze(2)"),
            (
                "t2",
                "torch.sum(t1 * edges.dst['q'], dim=-1)"
                + rng.choice(["", " / 2.0", " * edges.type['pri'] / 2.0", " * edges.type['pri'][:, :1]"]),
            ),
            ("t3", "edges.src['k'].squeeze(2)"),
        ]
        ret = "{'e': t2, 'v': t3}"
        rbody = [
            ("t1", "torch.softmax(nodes.mailbox['e'], dim=1)"),
            ("t2", "torch.sum(t1.unsqueeze(-1) * nodes.mailbox['v'], dim=1).flatten(1)"),
        ]
    msg = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "edges", body, ret, [], "message")
    red = render_udf(
        src,
        binder,
        rng.choice(Binder.PLACEMENTS),
        "nodes",
        rbody,
        "{'o': t1}" if kind == "rgcn" else "{'o': t2}",
        [],
        "reduce",
    )
    src.fwd.append(f"g.update_all({msg}, {red}, compile=C)")
    src.fwd.append("return g.ndata['o']")


def family_typed_attention(src: Src, binder: Binder) -> None:
    """DGL's two-call relational attention, the per-relation tables indexed by ``edges.data['rel_type']`` in the
    edge UDF (the RGAT and HGT example forms, negative types included): ``apply_edges``, then an
    ``update_all`` reading its edge features, maybe a max over them, maybe a read of them back."""
    rng, d = _begin(src, "typed_attention", 0.0)
    R, heads, dh = rng.randint(1, 4), rng.choice([1, 2]), rng.choice([2, 3])
    low = -R if rng.random() < 0.3 else 0
    src.fwd += [
        "gen = torch.Generator().manual_seed(13)",
        f"g.edata['rel_type'] = torch.randint({low}, {R}, (g.num_edges(),), generator=gen)",
    ]
    kind = rng.choice(["rgat", "hgt"])
    src.tag(f"typed_attention:{kind}")
    mm = rng.choice(["torch.bmm({x}.unsqueeze(1), {w}).squeeze(1)", "torch.matmul({x}.unsqueeze(1), {w}).squeeze(1)"])
    if kind == "rgat":
        weights = [("W0", Weight("typed", d, heads * dh, r=R)), ("W1", Weight("typed", heads, 2 * dh, r=R))]
        body = [
            ("t1", "{W0}[edges.data['rel_type']]"),
            ("t2", mm.format(x="edges.src['h']", w="t1") + f".view(-1, {heads}, {dh})"),
            ("t3", mm.format(x="edges.dst['h']", w="t1") + f".view(-1, {heads}, {dh})"),
            ("t4", "F.leaky_relu((torch.cat([t2, t3], dim=-1) * {W1}[edges.data['rel_type']]).sum(-1), 0.2)"),
        ]
        ret = "{'e': t4, 'z': t2}"
    else:
        for name in ("k", "q", "v"):
            lin = binder.model_attr(Weight("linear", d, heads * dh, bias=False), name)
            src.fwd.append(f"g.ndata['{name}'] = {lin}(x).view(-1, {heads}, {dh})")
        tables = []
        for name in ("att", "msg"):
            raw = binder.model_attr(Weight("typed", heads * dh, dh, r=R), name)
            tables.append(src.name(name))
            src.fwd.append(f"{tables[-1]} = {raw}.view({R}, {heads}, {dh}, {dh})")
        pri = binder.model_attr(Weight("typed", heads, 1, r=R), "pri")
        tables.append(src.name("pri"))
        src.fwd.append(f"{tables[-1]} = {pri}.view({R}, {heads})")
        weights = [("W0", tables[0]), ("W1", tables[1]), ("W2", tables[2])]
        body = [
            ("t1", "torch.matmul(edges.src['k'].unsqueeze(2), {W0}[edges.data['rel_type']]).squeeze(2)"),
            (
                "t2",
                "(edges.dst['q'] * t1).sum(dim=-1)"
                + rng.choice(["", " / 2.0", " * {W2}[edges.data['rel_type']] / 2.0"]),
            ),
            ("t3", "torch.matmul(edges.src['v'].unsqueeze(2), {W1}[edges.data['rel_type']]).squeeze(2)"),
        ]
        ret = "{'e': t2, 'z': t3}"
    ae = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "edges", body, ret, weights, "edge_attention")
    src.fwd.append(f"g.apply_edges({ae}, compile=C)")
    if rng.random() < 0.2:
        src.fwd.append("g.update_all(fn.copy_e('e', 'm'), fn.max('m', 'o'), compile=C)")
        src.tag("typed_attention:max")
    else:
        mf = rng.choice(["lambda edges: {'z': edges.data['z'], 'e': edges.data['e']}", "copy"])
        if mf == "copy":
            mf = render_udf(
                src,
                binder,
                rng.choice(Binder.PLACEMENTS),
                "edges",
                [("t1", "edges.data['z']"), ("t2", "edges.data['e']")],
                "{'z': t1, 'e': t2}",
                [],
                "message",
            )
        rbody = [
            ("t1", "torch.softmax(nodes.mailbox['e'], dim=1)"),
            ("t2", "torch.sum(t1.unsqueeze(-1) * nodes.mailbox['z'], dim=1).flatten(1)"),
        ]
        red = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "nodes", rbody, "{'o': t2}", [], "reduce")
        src.fwd.append(f"g.update_all({mf}, {red}, compile=C)")
    src.fwd.append("return g.ndata['o'], g.edata['e']" if rng.random() < 0.3 else "return g.ndata['o']")


def family_apply_edges(src: Src, binder: Binder) -> None:
    """apply_edges only (edge outputs read back), or chained into an update_all reading the edge feature, or
    its result read by user code, transformed and written back for an update_all (CompGCN's and
    AttentiveFP's pattern: from the second step such a plan may run in the user's edge order; an update_all
    summing arithmetic on that feature runs in the user's order too)."""
    rng, d = _begin(src, "apply_edges", 0.15)
    edge_input = rng.random() < 0.5
    if edge_input:
        src.fwd.append(
            f"g.edata['w'] = torch.rand(g.num_edges(), {rng.choice([1, d])}, "
            "generator=torch.Generator().manual_seed(7)) + 0.1"
        )
    weights: list = []
    body, out = _msg_body(rng, d, weights, allow_edge=edge_input)
    ae = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "edges", body, "{'a': " + out + "}", weights, "edge_fn")
    src.fwd.append(f"g.apply_edges({ae}, compile=C)")
    ending = rng.random()
    if ending < 0.3:
        src.fwd.append("return g.edata['a']")
        return
    if ending < 0.6:
        src.tag("apply_edges_read_back")
        src.fwd.append("g.edata['b'] = torch.tanh(g.edata['a']) * 2.0")
        if rng.random() < 0.5:
            src.fwd.append("g.update_all(fn.copy_e('b', 'm'), fn.sum('m', 'o'), compile=C)")
        else:  # arithmetic on the user-order edge feature: a generated loop, run in the user's edge order
            src.tag("update_all_user_order")
            src.fwd.append(
                "g.update_all(lambda e: {'m': torch.sigmoid(e.data['b']) * 2.0 + e.data['b']}, "
                "fn.sum('m', 'o'), compile=C)"
            )
        src.fwd.append("return g.ndata['o'], g.edata['a']")
        return
    mbody = [("t1", chain(rng, ["edges.data['a']", "edges.src['h']"], rng.randint(0, 2)))]
    if rng.random() < 0.5:
        mf = render_udf(src, binder, rng.choice(Binder.PLACEMENTS), "edges", mbody, "{'m': t1}", [], "message")
    else:
        mf = rng.choice(["fn.copy_e('a', 'm')", "fn.u_mul_e('h', 'a', 'm')", "fn.e_add_v('a', 'h', 'm')"])
    red = rng.choice(["fn.sum('m', 'o')", "fn.max('m', 'o')", "fn.mean('m', 'o')"])
    src.fwd.append(f"g.update_all({mf}, {red}, compile=C)")
    src.fwd.append("return g.ndata['o'], g.edata['a']" if rng.random() < 0.3 else "return g.ndata['o']")


def family_forward_code(src: Src, binder: Binder) -> None:
    """User code between message-passing calls, which the forward passes rewrite under ``gnnc.compile``:
    per-node-type linears applied by boolean masks (DGL's HGT example on a homogeneous graph) into a buffer
    the forward allocates, maybe a second per-type loop on the result, and a linear per head (DGL's GAT
    tutorial). Variants: a type no loop writes, the type feature read once or in every iteration, and a line
    that must stop a rewrite (a read of the buffer between writes, an in-place write)."""
    rng, d = _begin(src, "forward_code", 0.0)
    T, unwritten = rng.randint(1, 3), rng.random() < 0.3
    *head, last = src.graph
    src.graph = head + [
        last.replace("return ", "g = ", 1),
        f"g.ndata['ntype'] = torch.randint(0, {T + unwritten}, (g.num_nodes(),), "
        f"generator=torch.Generator().manual_seed({rng.randint(0, 10**6)}))",
        "return g",
    ]
    style = rng.choice(["masks", "masks", "heads", "both"])
    src.tag(f"forward_code:{style}")
    if style == "heads":
        out, width = "x", d
    else:
        blocker = rng.choice([None] * 8 + ["read", "in_place"])
        allocs = ["torch.zeros_like(x)", f"x.new_zeros(x.shape[0], {d})", f"torch.zeros(g.num_nodes(), {d})"]
        if not unwritten and blocker != "read":  # rows nobody has written yet hold whatever memory held
            allocs += [f"x.new_empty(x.shape[0], {d})", "torch.empty_like(x)", f"torch.empty(x.shape[0], {d})"]
        buffers = [src.name("k") for _ in range(rng.choice([1, 2]))]
        src.fwd += [f"{b} = {rng.choice(allocs)}" for b in buffers]
        once = rng.random() < 0.5
        if once:
            src.fwd.append("ntype = g.ndata['ntype']")
        if blocker:
            src.tag(f"forward_code:blocker_{blocker}")
            src.fwd.append("acc = x.sum()")
        lists = []
        for b in buffers:
            lists.append(src.name("lins"))
            src.init.append(
                f"self.{lists[-1]} = nn.ModuleList([nn.Linear({d}, {d}, bias={rng.random() < 0.5}) "
                f"for _ in range({T})])"
            )
        src.fwd += [f"for t in range({T}):", "    mask = " + ("ntype == t" if once else "g.ndata['ntype'] == t")]
        src.fwd += [f"    {b}[mask] = self.{lins}[t](x[mask])" for b, lins in zip(buffers, lists)]
        if blocker == "read":
            src.fwd.append(f"    acc = acc + {buffers[0]}.sum()")
        elif blocker == "in_place":
            src.fwd.append("    acc.add_(1.0)")
        out, width = " + ".join(buffers) + (" + acc" if blocker else ""), d
    if style in ("heads", "both"):
        heads = src.name("fcs")
        K, dh = rng.choice([2, 3]), rng.choice([2, 3])
        src.init.append(
            f"self.{heads} = nn.ModuleList([nn.Linear({d}, {dh}, bias={rng.random() < 0.5}) for _ in range({K})])"
        )
        src.fwd += [
            "outs = []",
            f"for fc in self.{heads}:",
            f"    g.ndata['z'] = fc({out})",
            "    g.update_all(lambda edges: {'m': edges.src['z'] * torch.sigmoid(edges.dst['z'].sum(-1, "
            "keepdim=True))}, fn.sum('m', 'o'), compile=C)",
            "    outs.append(g.ndata.pop('o'))",
            "o = torch.cat(outs, 1)",
        ]
        width = K * dh
    else:
        src.fwd += [
            f"g.ndata['h'] = {out}",
            rng.choice(
                [
                    "g.update_all(fn.copy_u('h', 'm'), fn.sum('m', 'o'), compile=C)",
                    "g.update_all(lambda edges: {'m': edges.src['h'] * edges.dst['h']}, fn.mean('m', 'o'), compile=C)",
                ]
            ),
            "o = g.ndata['o']",
        ]
    if style != "heads" and rng.random() < 0.4:  # a second per-type loop, HGT's gated skip
        a, skip = src.name("a"), src.name("skip")
        src.init += [
            f"self.{a} = nn.ModuleList([nn.Linear({width}, {d}) for _ in range({T})])",
            f"self.{skip} = nn.Parameter(torch.randn({T}))",
        ]
        src.fwd += [
            "res = torch.zeros_like(x)",
            f"for t in range({T}):",
            "    mask = g.ndata['ntype'] == t",
            f"    alpha = torch.sigmoid(self.{skip}[t])",
            f"    res[mask] = F.gelu(self.{a}[t](o[mask])) * alpha + x[mask] * (1 - alpha)",
            "o = res",
        ]
    src.fwd.append("return o")


def family_head_blocks(src: Src, binder: Binder) -> None:
    """A layer per attention head, as DGL's GAT tutorial writes it: K head modules of one class, each writing
    its features, calling apply_edges / update_all with its own bound UDFs and reading its result; the
    outputs concatenated, stacked or averaged. Under ``gnnc.compile`` the heads run as one block
    (``passes.batch_heads``) or, where they cannot, one by one. Variants: per-head linears inside the UDFs
    (attention vectors of both ends, full-width maps), per-head vector parameters, a global module shared
    by all heads, a shared edge weight, softmax or plain reduces, an update, reads instead of pops, the body
    in a local scope, and heads that read the previous head's result."""
    rng, d = _begin(src, "head_blocks", 0.0)
    *head, last = src.graph  # the edge weight comes with the graph (a tensor made in forward stops capture)
    src.graph = head + [
        last.replace("return ", "g = ", 1),
        "g.edata['w'] = torch.rand(g.num_edges(), 1, generator=torch.Generator().manual_seed(5)) + 0.1",
        "return g",
    ]
    K, dh = rng.choice([2, 3]), rng.choice(WIDTHS)
    head = src.name("Head")
    init = [f"self.fc = nn.Linear({d}, {dh}, bias={rng.random() < 0.3})"]
    slope = rng.choice(["", ", 0.2"])
    form = rng.choice(["linear", "vectors", "chain"])
    src.tag(f"head_blocks:{form}")
    if form == "linear":
        init.append(f"self.attn = nn.Linear({2 * dh}, 1, bias={rng.random() < 0.3})")
        edge = [
            "z2 = torch.cat([edges.src['z'], edges.dst['z']], dim=" + rng.choice(["1", "-1"]) + ")",
            f"return {{'e': F.leaky_relu(self.attn(z2){slope})}}",
        ]
    elif form == "vectors":
        init += [f"self.al = nn.Parameter(torch.randn({dh}) * 0.5)", f"self.ar = nn.Parameter(torch.randn({dh}) * 0.5)"]
        edge = [
            "e = (edges.src['z'] * self.al).sum(-1, keepdim=True) + (edges.dst['z'] * self.ar).sum(dim=-1, "
            "keepdim=True)",
            f"return {{'e': F.leaky_relu(e{slope})}}",
        ]
    else:
        expr = chain(
            rng,
            ["edges.src['z']", "edges.dst['z']", "edges.data['w']"],
            rng.randint(1, 3),
            ["edges.src['z']", "edges.dst['z']"],
        )
        edge = [f"return {{'e': ({expr}).sum(-1, keepdim=True)}}"]
    shared = rng.random() < 0.25
    if shared:  # one module for all heads, reached as a global
        gname = src.name("GSHARED")
        src.globals.append(f"{gname} = nn.Linear({dh}, {dh})")
        src.leaves.append(f"*{gname}.parameters()")
        src.tag("head_blocks:shared_global")
    msg_value = rng.choice(
        ["edges.src['z']", "edges.src['z'] * edges.data['w']", "self.W(edges.src['z'])"]
        + ([f"{gname}(edges.src['z'])"] if shared else [])
    )
    if "self.W" in msg_value:
        init.append(f"self.W = nn.Linear({dh}, {dh}, bias={rng.random() < 0.5})")
        src.tag("head_blocks:linear_message")
    chained = rng.random() < 0.1
    if chained:  # each head reads what the previous head left: they must run in order
        msg_value = f"({msg_value}) + edges.src['acc']"
        src.tag("head_blocks:chained")
    message = [f"return {{'z': {msg_value}, 'e': edges.data['e']}}"]
    out_key = rng.choice(["h", "o"])
    if rng.random() < 0.6:
        reduce = [
            "alpha = " + rng.choice(["F.softmax(nodes.mailbox['e'], dim=1)", "torch.softmax(nodes.mailbox['e'], 1)"]),
            f"return {{'{out_key}': torch.sum(alpha * nodes.mailbox['z'], dim=1)}}",
        ]
    else:
        plain = _reduce_stmt(rng, "nodes.mailbox['z']")
        reduce = [f"return {{'{out_key}': {plain} * torch.sigmoid(nodes.mailbox['e'].mean(1))}}"]
    if chained:
        reduce[-1] = reduce[-1].replace(f"{{'{out_key}':", "{'acc':")
        out_key = "acc"
    update = None
    if rng.random() < 0.25 and not chained:
        update = [f"return {{'{out_key}': torch.tanh(nodes.data['{out_key}']) + nodes.data['z']}}"]
        src.tag("head_blocks:update")
    read = "pop" if rng.random() < 0.7 and not chained else "read"
    calls = ["g.apply_edges(self.edge_attention, compile=C)"]
    if not chained and rng.random() < 0.25:  # built-ins per head, the edge weight shared by all heads
        src.tag("head_blocks:builtins")
        message, reduce = None, None
        builtins = (
            rng.choice(
                [
                    "fn.u_mul_e('z', 'w', 'm')",
                    "fn.copy_u('z', 'm')",
                    "fn.e_mul_u('e', 'z', 'm')",
                    "fn.u_add_v('z', 'z', 'm')",
                ]
            )
            + f", fn.{rng.choice(['sum', 'mean', 'max'])}('m', "
            f"'{out_key}')"
        )
        calls.append(f"g.update_all({builtins}" + (", self.update_func" if update else "") + ", compile=C)")
    elif update is None:
        calls.append("g.update_all(self.message_func, self.reduce_func, compile=C)")
    else:
        calls.append(
            rng.choice(
                [
                    "g.update_all(self.message_func, self.reduce_func, self.update_func, compile=C)",
                    "g.update_all(message_func=self.message_func, reduce_func=self.reduce_func, "
                    "apply_node_func=self.update_func, compile=C)",
                ]
            )
        )
    result = f"g.ndata.pop('{out_key}')" if read == "pop" else f"g.ndata['{out_key}']"
    lines = [f"class {head}(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    lines += ["        " + line for line in init] + [""]
    for name, body in (
        ("edge_attention", edge),
        ("message_func", message),
        ("reduce_func", reduce),
        ("update_func", update),
    ):
        if body is not None:
            lines += [f"    def {name}(self, {'edges' if name in ('edge_attention', 'message_func') else 'nodes'}):"]
            lines += ["        " + line for line in body] + [""]
    body = ["g.ndata['z'] = self.fc(h)"] + calls
    if rng.random() < 0.3 and not chained:  # DGL's usual layer body: all inside a local scope, read before leaving
        body = ["with g.local_scope():"] + ["    " + line for line in body] + [f"    return g.ndata['{out_key}']"]
        src.tag("head_blocks:local_scope")
    else:
        body.append(f"return {result}")
    lines += ["    def forward(self, g, h, C=None):"] + ["        " + line for line in body] + [""]
    src.funcs += lines
    if reduce is not None:  # a reduce UDF writes nothing on a graph without edges (DGL): give it one edge
        src.graph = [
            re.sub(r"gnnc\.graph\(\(\[\], \[\]\), num_nodes=\d+\)", "gnnc.graph(([0], [0]), num_nodes=1)", line)
            for line in src.graph
        ]
    src.init.append(f"self.heads = nn.ModuleList([{head}() for _ in range({K})])")
    if chained:
        src.fwd.append(f"g.ndata['acc'] = x.new_zeros(x.shape[0], {dh})")
    src.fwd.append("outs = [head(g, x, C) for head in self.heads]")
    src.fwd.append(
        rng.choice(
            [
                "return torch.cat(outs, dim=1)",
                "return torch.cat(outs, -1)",
                "return torch.stack(outs, 1).flatten(1)",
                "return torch.mean(torch.stack(outs), 0)",
            ]
        )
    )


def family_scope_code(src: Src, binder: Binder) -> None:
    """DGL-style layer bodies kept in a local scope, which the scope passes rewrite under ``gnnc.compile``
    (``release_features``, ``scope_deferral``): node features written from linears of x (one name also used
    for an edge feature), an ``apply_edges`` whose results gather or combine them (holding the call's inputs),
    an ``update_all`` reading edge results and a node feature written before ``apply_edges``, then reads,
    pops and per-type code after the last call. Variants that must stop a pass: an in-place write, an eager
    call (``compile=False``) after ``apply_edges``, a second ``apply_edges`` after ``update_all``, a read of a
    feature written before the calls."""
    rng, d = _begin(src, "scope_code", 0.0)
    k, q, v = (src.name(n) for n in ("k", "q", "v"))
    src.init += [f"self.{n} = nn.Linear({d}, {d}, bias={rng.random() < 0.5})" for n in (k, q, v)]
    score = rng.choice(
        [
            "(edges.src['k'] * edges.dst['q']).sum(-1, keepdim=True)",
            "edges.src['k'][:, :1] + edges.dst['q'][:, :1]",
            "edges.src['k'] + edges.dst['q']",
        ]
    )
    edge_out = rng.choice(["{'a': %s, 'v': edges.src['v']}", "{'a': %s}", "{'a': %s, 'v': edges.src['v'] * 2.0}"])
    src.funcs += ["def edge_attention(edges):", f"    return {edge_out % score}", ""]
    uses_v = "'v'" in edge_out
    message = "edges.data['v']" if uses_v else "edges.src['v']"
    src.funcs += [
        "def message(edges):",
        f"    return {{'m': torch.sigmoid(edges.data['a']) * {message} + edges.src['k']}}",
        "",
    ]
    blocker = rng.choice([None] * 6 + ["in_place", "eager", "again"])
    if blocker:
        src.tag(f"scope_code:{blocker}")
    body = [
        f"g.ndata['k'], g.ndata['q'], g.ndata['v'] = self.{k}(x), self.{q}(x), self.{v}(x)",
        "g.apply_edges(edge_attention, compile=C)",
    ]
    if blocker == "eager":
        body.append("g.apply_edges(lambda edges: {'b': edges.data['a'] * 0.5}, compile=False)")
    body.append(
        rng.choice(
            [
                "g.update_all(message, fn.sum('m', 't'), compile=C)",
                "g.update_all(message, fn.mean('m', 't'), compile=C)",
            ]
        )
    )
    if blocker == "again":
        body.append("g.apply_edges(lambda edges: {'c': edges.src['t'] * edges.dst['t']}, compile=C)")
    reads = rng.choice([["t"], ["t", "q"], ["t", "v"], ["t", "k", "v"]])
    out = []
    for key in reads:
        how = "pop" if key != "t" and rng.random() < 0.4 else "read"
        out.append(f"g.ndata.pop('{key}')" if how == "pop" else f"g.ndata['{key}']")
    body.append("o = " + " + ".join(out))
    if blocker == "again":
        body.append("o = o + g.edata['c'].sum() * 0.0")
    if blocker == "in_place":
        body.append("o.mul_(1.5)")
    if rng.random() < 0.3:  # HGT's per-type skip after the calls
        T = rng.randint(2, 3)
        *head, last = src.graph
        src.graph = head + [
            last.replace("return ", "g = ", 1),
            f"g.ndata['ntype'] = torch.randint(0, {T}, (g.num_nodes(),), "
            f"generator=torch.Generator().manual_seed({rng.randint(0, 10**6)}))",
            "return g",
        ]
        a = src.name("a")
        src.init.append(f"self.{a} = nn.ModuleList([nn.Linear({d}, {d}) for _ in range({T})])")
        body += [
            "res = torch.zeros_like(x)",
            f"for t in range({T}):",
            "    mask = g.ndata['ntype'] == t",
            f"    res[mask] = F.gelu(self.{a}[t](o[mask])) + x[mask]",
            "o = res",
        ]
        src.tag("scope_code:per_type")
    src.fwd += ["with g.local_scope():"] + ["    " + line for line in body] + ["    return o"]


def _edgeless(src: Src) -> bool:
    return "gnnc.graph(([], [])" in "\n".join(src.graph)


def family_layers(src: Src, binder: Binder) -> None:
    """Layers applied one after another, as DGL's tutorials write models: a ModuleList (or named attributes) of
    layer modules, each writing the features it was given, calling update_all and popping or reading its result
    (``g.ndata['h'] = h; g.update_all(...); return g.ndata.pop('h')``), with or without an activation between
    layers. Variants: one layer instance used twice, a sub-module every layer shares, a UDF reading the
    previous layer's result through a second feature, an update, a local scope reading a reduce output
    beside the input."""
    rng, d = _begin(src, "layers", 0.0)
    edgeless = _edgeless(src)  # a reduce UDF writes nothing there: read only what a built-in or the input left
    L = rng.choice([2, 2, 3])
    body = rng.choice(["pop", "pop", "update", "scope"])
    src.tag(f"layers:{body}")
    share = rng.choice([None, None, "instance", "submodule"])
    if share:
        src.tag(f"layers:shared_{share}")
    layer = src.name("Layer")
    init = [f"self.W = nn.Linear({d}, {d}, bias={rng.random() < 0.5})"]
    shared_arg = ", shared" if share == "submodule" else ""
    if share == "submodule":
        init.append("self.shared = shared")
    methods: dict[str, list[str]] = {}
    src_value = rng.choice(["self.W(edges.src['h'])", "edges.src['h']", "edges.src['h'] * edges.dst['h']"])
    if share == "submodule":
        src_value = f"self.shared({src_value})"
    if rng.random() < 0.25:  # the previous layer's popped result, kept as a second feature
        src_value += " + edges.src['prev']"
        src.tag("layers:prev_feature")
    methods["message_func"] = ["edges", f"return {{'m': {src_value}}}"]
    reduce_key = {"pop": "h", "update": "c", "scope": "neigh"}[body]
    udf_reduce = rng.random() < 0.6 and not (edgeless and body != "pop")
    if udf_reduce:
        red = "self.reduce_func"
        reduced = _reduce_stmt(rng, "nodes.mailbox['m']")
        methods["reduce_func"] = ["nodes", f"return {{'{reduce_key}': {reduced}}}"]
    else:
        red = f"fn.{rng.choice(['sum', 'mean', 'max'])}('m', '{reduce_key}')"
    msg = "self.message_func" if rng.random() < 0.7 else "fn.copy_u('h', 'm')"
    if msg.startswith("fn."):
        methods.pop("message_func")
    if body == "update":
        methods["update_func"] = [
            "nodes",
            "return {'h': "
            + rng.choice(["torch.tanh(nodes.data['c']) + nodes.data['h']", "self.W(nodes.data['c'] + nodes.data['h'])"])
            + "}",
        ]
        call = f"g.update_all({msg}, {red}, self.update_func, compile=C)"
    else:
        call = f"g.update_all({msg}, {red}, compile=C)"
    fwd = ["g.ndata['h'] = h", call]
    if body == "scope":
        init.append(f"self.out = nn.Linear({2 * d}, {d})")
        fwd = (
            ["with g.local_scope():"]
            + ["    " + line for line in fwd]
            + ["    return self.out(torch.cat([h, g.ndata['neigh']], 1))"]
        )
    else:
        fwd.append(rng.choice(["return g.ndata.pop('h')", "return g.ndata['h']"]))
    lines = [f"class {layer}(nn.Module):", f"    def __init__(self{shared_arg}):", "        super().__init__()"]
    lines += ["        " + line for line in init] + [""]
    for name, (arg, *mbody) in methods.items():
        lines += [f"    def {name}(self, {arg}):"] + ["        " + line for line in mbody] + [""]
    lines += ["    def forward(self, g, h, C=None):"] + ["        " + line for line in fwd] + [""]
    src.funcs += lines
    if share == "submodule":
        src.init.append(f"shared = nn.Linear({d}, {d})")
    make = f"{layer}({'shared' if share == 'submodule' else ''})"
    if share == "instance":
        src.init += [f"layer = {make}", f"self.layers = nn.ModuleList([layer] * {L})"]
    else:
        src.init.append(f"self.layers = nn.ModuleList([{make} for _ in range({L})])")
    act = rng.choice([None, "F.relu", "torch.tanh", "F.elu"])
    src.tag(f"layers:act_{act is not None}")
    prev = "layers:prev_feature" in src.tags
    if rng.random() < 0.6:
        src.fwd += ["h = x", "for i, layer in enumerate(self.layers):"]
        if prev:
            src.fwd.append("    g.ndata['prev'] = h")
        src.fwd.append("    h = layer(g, h, C)")
        if act:
            src.fwd += ["    if i != len(self.layers) - 1:", f"        h = {act}(h)"]
    else:  # unrolled, as a two-layer tutorial model writes it
        src.tag("layers:unrolled")
        src.fwd.append("h = x")
        for i in range(L):
            if prev:
                src.fwd.append("g.ndata['prev'] = h")
            src.fwd.append(f"h = self.layers[{i}](g, h, C)")
            if act and i != L - 1:
                src.fwd.append(f"h = {act}(h)")
    src.fwd.append("return h")


def _dag_lines(rng) -> list[str]:
    """A DAG (tree-LSTM's trees: each node's edge to an earlier parent, maybe extra edges to earlier nodes)."""
    n, extra, seed = rng.randint(3, 12), rng.choice([0, 0, 3, 8]), rng.randint(0, 10**6)
    return [
        "gen = torch.Generator().manual_seed(" + f"{seed} + i)",
        f"n = {n} + i",
        "child = torch.arange(1, n)",
        "parent = (torch.rand(n - 1, generator=gen) * child).long()",
        f"more = torch.randint(1, n, ({extra},), generator=gen)",
        "to = (torch.rand(more.shape[0], generator=gen) * more).long()",
        "return gnnc.graph((torch.cat([child, more]), torch.cat([parent, to])), num_nodes=n)",
    ]


def family_partial(src: Src, binder: Binder) -> None:
    """Partial calls and propagation under ``gnnc.compile`` (each runs the compiled plan of its compute
    graph): ``g.pull(v, ...)``, ``g.send_and_recv`` on edge ids or (u, v) pairs, ``g.push(u, ...)``,
    ``g.apply_edges(func, eids)``, with and without an update; ``gnnc.prop_nodes_topo`` /
    ``gnnc.prop_nodes_bfs`` / ``g.prop_nodes`` on DAGs (tree-LSTM's child sums). The features a reduce or an
    update writes exist before the call (a compute graph may have no edges, where a reduce UDF writes
    nothing, as DGL). A node initializer with a reduce UDF is designed to fall back."""
    rng, d = _begin(src, "partial", 0.0)
    form = rng.choice(["pull", "send_and_recv", "pairs", "push", "apply_edges", "prop"])
    src.tag(f"partial:{form}")
    src.graph = (
        _dag_lines(rng)
        if form == "prop"
        else [  # python ids below name existing nodes and edges
            "from tests.graphs import random_homograph",
            f"return random_homograph({rng.randint(4, 16)} + i, {rng.randint(5, 40)} + i, {rng.randint(0, 10**6)} + i)",
        ]
    )
    src.init.append(f"self.W = nn.Linear({d}, {d}, bias={rng.random() < 0.5})")
    msg = rng.choice(
        [
            "lambda edges: {'m': self.W(edges.src['h'])}",
            "fn.copy_u('h', 'm')",
            "lambda edges: {'m': edges.src['h'] * torch.sigmoid(edges.dst['h'])}",
        ]
    )
    udf_reduce = rng.random() < 0.6
    update = rng.random() < 0.4
    key = "c" if update else rng.choice(["o", "h"])
    if udf_reduce:
        reduced = _reduce_stmt(rng, "nodes.mailbox['m']")
        red = f"lambda nodes: {{'{key}': {reduced}}}"
    else:
        red = f"fn.{rng.choice(['sum', 'mean', 'max'])}('m', '{key}')"
    src.fwd += ["g.ndata['x0'] = x", f"g.ndata['{key}'] = torch.zeros_like(x)" if key != "h" else "h0 = x"]
    out, upd = key, None
    args = f"{msg}, {red}"
    if update:
        out = "u" if form != "prop" else "h"  # propagation: the update writes what the next frontier reads
        if form != "prop":
            src.fwd.append("g.ndata['u'] = torch.zeros_like(x)")
        upd = f"lambda nodes: {{'{out}': torch.tanh(self.W(nodes.data['x0']) + nodes.data['c'])}}"
        args += f", {upd}"
        src.tag("partial:update")
    if form == "prop" and udf_reduce and rng.random() < 0.2:  # DGL's tree-LSTM sets one; compiled calls do not yet
        src.fwd.append("g.set_n_initializer(lambda shape, dtype, ctx, id_range: torch.zeros(shape, dtype=dtype))")
        src.tag("partial:initializer")
        src.options["expect"] = "fallback"
    ids = rng.choice(["py", "arange"])
    if form == "pull":
        v = "[0, 1]" if ids == "py" else "torch.arange(0, g.num_nodes(), 2)"
        src.fwd.append(f"g.pull({v}, {args})")
    elif form in ("send_and_recv", "pairs", "apply_edges"):
        eids = "[0, 2, 3, 4]" if ids == "py" else "torch.arange(1, g.num_edges(), 2)"
        if form == "apply_edges":
            src.fwd += [
                (
                    "g.apply_edges(lambda edges: {'a': torch.sigmoid((edges.src['h'] * edges.dst['h']).sum(-1, "
                    f"keepdim=True))}}, {eids})"
                ),
                f"g.update_all(fn.u_mul_e('h', 'a', 'm'), {red}" + (f", {upd}" if update else "") + ")",
            ]
            if rng.random() < 0.3:
                src.fwd.append(f"return g.ndata['{out}'], g.edata['a']")
                return
        elif form == "pairs":
            src.fwd += ["s, t = g.edges()", f"e = torch.as_tensor({eids})", f"g.send_and_recv((s[e], t[e]), {args})"]
        else:
            src.fwd.append(f"g.send_and_recv({eids}, {args})")
    elif form == "push":
        u = "[0, 1]" if ids == "py" else "torch.arange(0, g.num_nodes(), 3)"
        src.fwd.append(f"g.push({u}, {args})")
    else:
        how = rng.choice(["topo", "bfs", "generator"])
        src.tag(f"partial:prop_{how}")
        if not update:  # the reduce writes what the next frontier reads
            red = red.replace(f"'{key}'", "'h'")
            args = f"{msg}, {red}"
            out = "h"
        tail = f", apply_node_func={upd}" if update else ""
        if how == "topo":
            src.fwd.append(f"gnnc.prop_nodes_topo(g, {msg}, {red}{tail})")
        elif how == "bfs":
            src.fwd.append(f"gnnc.prop_nodes_bfs(g, 0, {msg}, {red}, reverse=True{tail})")
        else:
            src.fwd.append(f"g.prop_nodes(gnnc.topological_nodes_generator(g), {args})")
    src.fwd.append(f"return g.ndata['{out}']")


LARGE_BASES = ("homo", "gat", "builtin", "relational", "typed_attention", "apply_edges")


def family_large(src: Src, binder: Binder) -> None:
    """float32 programs of the other families on graphs large enough for the CPU kernels' parallel launches
    (``PARALLEL_MIN_WORK`` element operations: 25-40 thousand edges of width 3-4) and, with the pair-table
    kernels' parts made small (``Program.small_parts``), the partitioned pair-table paths (R-GCN / RGAT pair
    tables on a heterograph of some thousand nodes); run on two threads."""
    base = src.rng.choice(LARGE_BASES)
    FAMILIES[base][0](src, binder)
    src.tag("fam:large")
    rng = src.rng
    n, m = rng.randint(1500, 3000), rng.randint(25000, 40000)
    big_homo = f"return random_homograph({n}, {m}, {rng.randint(0, 10**6)} + i)"
    big_hetero = (
        f"return random_heterograph({rng.randint(0, 10**6)} + i, sizes={{'user': {n // 2}, 'item': {n // 3}, "
        f"'tag': 1}}, edges_per_relation={m // 3})"
    )
    lines = []
    for line in src.graph:
        if line.startswith("return random_heterograph"):
            line = big_hetero
        elif line.startswith(("return random_homograph", "return gnnc.graph")):
            line = big_homo
        elif line.startswith(("g = random_homograph", "g = gnnc.graph")):
            line = big_homo.replace("return ", "g = ", 1)
        lines.append(line)
    if not any(line.startswith("from tests.graphs") for line in lines):
        lines.insert(0, "from tests.graphs import random_homograph")
    src.graph = lines
    src.options.update(dtype="float32", threads=2, small_parts=True, tied_inputs=False)


FAMILIES = {
    "homo": (family_homo, 4),
    "gat": (family_gat, 2),
    "builtin": (family_builtin, 2),
    "typed": (family_typed, 2),
    "hetero": (family_hetero, 2),
    "apply_edges": (family_apply_edges, 2),
    "relational": (family_relational, 2),
    "typed_attention": (family_typed_attention, 2),
    "forward_code": (family_forward_code, 2),
}
HEAD_BLOCKS_SHARE = 0.08  # added later, drawn from its own stream: other seeds keep their programs
SCOPE_CODE_SHARE = 0.06  # likewise
LAYERS_SHARE, PARTIAL_SHARE, LARGE_SHARE = 0.06, 0.06, 0.03  # likewise, each from its own stream
NUMPY_SCALAR_SHARE = 0.3  # of the python float scalars UDFs read, written as numpy scalars (likewise)


OPTIMIZER_SHARE = {"sgd": 0.4, "sgd_momentum": 0.3, "adam": 0.3}  # drawn from their own stream
OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
}
# Program.expect -> the outcomes that keep that promise ("match" is a compiled plan that ran and matched).
EXPECTATIONS = {
    "plan": ("match", "kink", "rounding"),  # at least one compiled plan runs, nothing falls back
    "fallback": ("fallback",),  # designed to fall back
    "no_plan": ("no_plan",),  # every call is eager (compile=None without gnnc.compile)
    "maybe_plan": ("match", "no_plan", "kink", "rounding"),  # a graph without edges: a reduce UDF has no plan
}


@dataclass
class Program:
    seed: int
    source: str
    tags: list[str]
    width: int
    scale: float
    use_compile_wrapper: bool
    steps: int
    tied_inputs: bool = False  # integer-valued node features: max / min meet ties (gradient to the first edge)
    optimizer: str = "sgd"  # the step between steps: see OPTIMIZERS
    expect: str = "plan"  # what the compiled run must do besides matching: see EXPECTATIONS
    dtype: str = "float64"
    threads: int = 0  # torch (and numba) threads for the run; 0: as set
    small_parts: bool = False  # the CPU pair-table kernels split their tables into parts of a few rows


def generate(seed: int) -> Program:
    """A random program (deterministic in ``seed``)."""
    rng = random.Random(seed)
    src = Src(rng, random.Random(f"numpy{seed}"))
    binder = Binder(src)
    names = list(FAMILIES)
    fam = rng.choices(names, weights=[FAMILIES[n][1] for n in names])[0]
    family = (
        family_head_blocks
        if random.Random(f"head_blocks{seed}").random() < HEAD_BLOCKS_SHARE
        else family_scope_code
        if random.Random(f"scope_code{seed}").random() < SCOPE_CODE_SHARE
        else FAMILIES[fam][0]
    )
    if family is FAMILIES[fam][0]:
        for later, share in (
            (family_layers, LAYERS_SHARE),
            (family_partial, PARTIAL_SHARE),
            (family_large, LARGE_SHARE),
        ):
            if random.Random(f"{later.__name__}{seed}").random() < share:
                family = later
                break
    family(src, binder)
    _guard_reads(src)
    _no_mean_across_relations(src)
    text = src.text()
    width = _input_width(text)
    scale = 1.0 if rng.random() < 0.8 else rng.choice([30.0, 300.0])
    if scale != 1.0:
        src.tag("large_inputs")
    steps = (
        3
        if any(
            t.startswith("store:tensor_attr")
            or t.startswith("derived")
            or t == "basis"
            or t.startswith("scalar")
            or t == "embed_view"
            or t == "global_tensor_rebound"
            for t in src.tags
        )
        else 2
    )
    compile_wrapper = rng.random() < 0.3 or any(
        t in src.tags
        for t in (  # passes; partial calls have no compile=
            "fam:forward_code",
            "fam:head_blocks",
            "fam:scope_code",
            "fam:layers",
            "fam:partial",
        )
    )
    tied = scale == 1.0 and rng.random() < 0.15  # drawn last: programs of earlier seeds keep their text
    if tied:
        src.tag("tied_inputs")
    optimizer = random.Random(f"optimizer{seed}").choices(list(OPTIMIZER_SHARE), list(OPTIMIZER_SHARE.values()))[0]
    options = {"expect": _expectation(text, compile_wrapper), "tied_inputs": tied, **src.options}
    return Program(seed, text, list(src.tags), width, scale, compile_wrapper, steps, optimizer=optimizer, **options)


# family_hetero's draw of no relation but the one without edges: there is nothing to compile
ONLY_THE_EMPTY_RELATION = "rels = [('tag', 'empty', 'user')]\n"


def _expectation(text: str, compile_wrapper: bool) -> str:
    """What the compiled run of a program must do (a key of EXPECTATIONS)."""
    if not compile_wrapper and "compile=C" not in text:
        return "no_plan"
    if "gnnc.graph(([], [])" in text or "edges_per_relation=0 " in text or ONLY_THE_EMPTY_RELATION in text:
        return "maybe_plan"
    return "plan"


def _guard_reads(src: Src) -> None:
    """On a graph that may have a block without edges (no edges at all, or a heterograph's empty relation), a
    reduce UDF writes nothing there (as DGL): its output is read only where it exists."""
    graph = "\n".join(src.graph)
    if (
        "gnnc.graph(([], [])" not in graph
        and "random_heterograph" not in graph
        or not any("mailbox" in line for line in src.fwd + src.funcs + src.methods)
    ):
        return
    src.fwd = [
        re.sub(
            r"(g\.ndata|g\.nodes\[(?:[^\[\]]|\[[^\]]*\])+\]\.data)\['o'\](?!\s*=[^=])",
            r"(\1['o'] if 'o' in \1 else x.new_zeros(0))",
            line,
        )
        for line in src.fwd
    ]


def _no_mean_across_relations(src: Src) -> None:
    """A whole-heterograph update_all cannot reduce with a built-in mean (DGL refuses it: mean within and
    across relations differ); there the generator's mean is a sum."""
    if any("random_heterograph" in line for line in src.graph):
        src.fwd = [
            line.replace("fn.mean(", "fn.sum(") if "g.update_all(" in line and "etype=" not in line else line
            for line in src.fwd
        ]


def _input_width(text: str) -> int:
    m = re.search(r"#WIDTH (\d+)", text)
    return int(m.group(1)) if m else 0


# --------------------------------------------------------------------------- running

_COUNTER = [0]


def load(program: Program) -> types.ModuleType:
    """Exec the program's source into a fresh module (file on disk, so tracebacks show lines)."""
    _COUNTER[0] += 1
    name = f"udf_fuzz_prog_{program.seed}_{os.getpid()}_{_COUNTER[0]}"
    folder = os.path.join(tempfile.gettempdir(), "gnnc_udf_fuzz")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.py")
    with open(path, "w") as f:
        f.write(program.source)
    mod = types.ModuleType(name)
    mod.__file__ = path
    sys.modules[name] = mod
    exec(compile(program.source, path, "exec"), mod.__dict__)  # noqa: S102 - the generated program, from its file
    return mod


@dataclass
class Outcome:
    status: str  # match | no_plan | mismatch | kink | rounding | crash | fallback | both_raise | eager_error
    seed: int
    reason: str = ""
    detail: str = ""
    tags: list[str] = field(default_factory=list)
    plans: int = 0  # compiled plans that ran (a "match" ran at least one)


def _normalize_reason(msg: str) -> str:
    msg = re.sub(r"\(?/[^\s():]+:\d+(?: \([^)]*\))?\)?", "<loc>", msg)
    msg = re.sub(r"udf_fuzz_prog_\w+", "<prog>", msg)
    msg = re.sub(
        r"\b(message|reduce|update|edge_fn|edge_attention|leaky|message_func|reduce_func|edge_w|"
        r"_helper|rel_message|G?W|w|d|p|wb|embed|basis|comp)\d+\b",
        r"\1N",
        msg,
    )
    msg = re.sub(r"%\w+", "%x", msg)
    msg = msg.replace("gnnc could not compile this call and runs it eagerly: ", "")
    return msg[:160]


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _grads(outs, weights, params):
    loss = sum((o * w).sum() for o, w in zip(outs, weights))
    if not loss.requires_grad:
        return [None] * len(params)
    return list(torch.autograd.grad(loss, params, allow_unused=True))


def _compare(eager, comp, what, slack=None):
    """Compiled ``comp`` == ``eager`` to RTOL / ATOL (float32: RTOL32, ATOL32 times the tensor's largest
    magnitude), widened by ``slack[i]`` (absolute) for tensor ``i``."""
    if len(eager) != len(comp):
        raise AssertionError(f"{what}: {len(eager)} outputs eager, {len(comp)} compiled")
    for i, (e, c) in enumerate(zip(eager, comp)):
        if e is None and c is None:
            continue
        if e is None or c is None:
            ref = e if e is not None else c
            e = torch.zeros_like(ref) if e is None else e
            c = torch.zeros_like(ref) if c is None else c
        try:
            rtol, atol = RTOL, ATOL
            if e.dtype == torch.float32:
                finite = e.detach()[torch.isfinite(e.detach())]
                rtol, atol = RTOL32, ATOL32 * max(1.0, float(finite.abs().max()) if finite.numel() else 1.0)
            atol += slack[i] if slack is not None else 0.0
            torch.testing.assert_close(c, e, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as err:
            raise AssertionError(f"{what}[{i}]: {str(err).strip()[:600]}") from None


def run_program(program: Program, clear_cache: bool = True) -> Outcome:
    """Run ``program`` eagerly and compiled over its steps; classify the outcome."""
    import gnnc
    from gnnc.compiler import driver as compiled_rt

    if clear_cache:
        compiled_rt.clear_cache()
    with _settings(program):
        outcome = _run(program, gnnc, compiled_rt)
        if outcome.status == "mismatch" and program.dtype == "float32":
            twin = dataclasses.replace(program, dtype="float64")
            compiled_rt.clear_cache()
            with _settings(twin):
                if _run(twin, gnnc, compiled_rt).status in ("match", "no_plan", "fallback", "rounding"):
                    return Outcome(
                        "rounding",
                        program.seed,
                        outcome.reason,
                        f"float32 only: the same program in float64 matches:\n{outcome.detail}",
                        outcome.tags,
                    )
        if outcome.status in ("mismatch", "rounding") and program.tied_inputs:
            compiled_rt.clear_cache()
            if _run(program, gnnc, compiled_rt, jitter=KINK_JITTER).status in ("match", "no_plan", "fallback"):
                return Outcome(
                    "kink",
                    program.seed,
                    outcome.reason,
                    f"matches with inputs jittered by {KINK_JITTER:g}:\n{outcome.detail}",
                    outcome.tags,
                )
        return outcome


@contextlib.contextmanager
def _settings(program: Program):
    """The program's default dtype, thread count and pair-table part sizes, restored after. Small parts: a
    pair table is rebuilt in backward whatever its size (``recompute.MIN_SHARE``) and in parts of a few rows."""
    from gnnc.backend import rebuild_in_backward as recompute
    from gnnc.backend.cpu import pair_softmax_aggregate as pairs

    saved = (
        torch.get_default_dtype(),
        torch.get_num_threads(),
        recompute.MIN_SHARE,
        pairs.PART_BYTES,
        pairs.FORWARD_PART_BYTES,
    )
    torch.set_default_dtype(getattr(torch, program.dtype))
    if program.threads:
        torch.set_num_threads(program.threads)
    if program.small_parts:
        recompute.MIN_SHARE, pairs.PART_BYTES, pairs.FORWARD_PART_BYTES = 0.0, SMALL_PART_BYTES, SMALL_PART_BYTES
    try:
        yield
    finally:
        torch.set_default_dtype(saved[0])
        torch.set_num_threads(saved[1])
        recompute.MIN_SHARE, pairs.PART_BYTES, pairs.FORWARD_PART_BYTES = saved[2:]


SMALL_PART_BYTES = 4096


def unexpected(program: Program, outcome: Outcome) -> str | None:
    """Why ``outcome`` is not what ``program.expect`` promises (None when it is): a program that should compile
    fell back or ran no plan, or one designed to fall back did not."""
    allowed = EXPECTATIONS[program.expect]
    if outcome.status in allowed or outcome.status in ("mismatch", "crash", "both_raise", "eager_error"):
        return None
    return f"expected {program.expect} ({' / '.join(allowed)}), got {outcome.status}: {outcome.reason}"


KINK_JITTER = 1e-7
MCA_PRECISION, MCA_RUNS = 2.0**-50, 3

# Ops that round nothing (data movement, selection, comparison): left unperturbed, also because backward
# formulas such as the eager max reduce's ``m == best`` rely on their outputs being exact copies.
_EXACT_OPS = frozenset(
    """
    amax amin max min maximum minimum scatter_reduce index_reduce argmax argmin sort topk relu threshold
    threshold_backward clamp clamp_min clamp_max hardtanh where masked_fill copy clone cat stack index_select
    gather scatter index index_put new_zeros zeros_like ones_like full_like empty_like fill zero
    constant_pad_nd neg abs sign _to_copy lift_fresh detach alias view_copy repeat expand_copy
""".split()
)


class _MonteCarloArithmetic(TorchDispatchMode):
    """Each rounding op's float64 result times ``1 + precision * U(-1, 1)``, elementwise (seeded)."""

    def __init__(self, precision: float, seed: int):
        super().__init__()
        self.precision = precision
        self.gen = torch.Generator().manual_seed(seed)

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        schema = func._schema
        if (
            func.overloadpacket.__name__ in _EXACT_OPS
            or schema.is_mutable
            or any(r.alias_info is not None for r in schema.returns)
        ):
            return out
        return tree_map(self._perturb, out)

    def _perturb(self, t):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float64 or t.numel() == 0:
            return t
        noise = torch.rand(t.shape, generator=self.gen, dtype=torch.float64) * 2 - 1
        return t * (1 + self.precision * noise)


def _within_rounding_noise(model, mod, step, x, loss_w, params, e_out, c_out, e_grads, c_grads) -> bool:
    """Compiled within eager's own float64 noise: |compiled - eager| no larger, tensor by tensor, than
    |eager under Monte Carlo arithmetic - eager| over MCA_RUNS reruns of the step."""
    out_runs, grad_runs = [], []
    try:
        for run in range(MCA_RUNS):
            with _MonteCarloArithmetic(MCA_PRECISION, seed=run):
                outs = _as_tuple(model(mod.make_graph(step), x, None))
                out_runs.append(outs)
                grad_runs.append(_grads(outs, loss_w, params))
    except Exception:  # noqa: BLE001 - no noise estimate: the difference stays a mismatch
        return False
    try:
        _compare(e_out, c_out, "forward", slack=_largest_deviation(e_out, out_runs))
        _compare(e_grads, c_grads, "grad", slack=_largest_deviation(e_grads, grad_runs))
    except AssertionError:
        return False
    return True


def _largest_deviation(reference, runs) -> list[float]:
    """Per tensor of ``reference``: the largest finite |run - reference| over ``runs``."""
    worst = []
    for i, ref in enumerate(reference):
        diffs = [(run[i].detach() - ref.detach()).abs() for run in runs if ref is not None and run[i] is not None]
        finite = [float(d[torch.isfinite(d)].max()) for d in diffs if torch.isfinite(d).any()]
        worst.append(max(finite, default=0.0))
    return worst


class _Side:
    """One executor's copy of the program: its module (globals), model and optimizer, built from the program's
    seed, so the eager and the compiled side start from the same state and step in lockstep."""

    def __init__(self, program: Program):
        torch.manual_seed(program.seed)
        self.mod = load(program)
        self.model = self.mod.Model()
        self.program = program
        unique = {id(p): p for p in [*self.model.parameters(), *self.mod.leaves(self.model)]}
        self.opt = OPTIMIZERS[program.optimizer](list(unique.values())) if unique else None

    def params(self, x) -> list:
        return list(self.model.parameters()) + list(self.mod.leaves(self.model)) + [x]

    def step(self, params, grads, step: int) -> None:
        """An optimizer step on ``grads`` (of ``params``, x last and not stepped); then plain tensor
        attributes are rebound, as users of plain tensors do after a step."""
        for p, grad in zip(params[:-1], grads[:-1]):
            p.grad = None if grad is None else grad.detach().clone()
        if self.opt is not None:
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        torch.manual_seed(self.program.seed + 7919 * (step + 1))  # the rebound tensors' noise: alike on both sides
        self.mod.rebind(self.model)


def _run(program, gnnc, compiled_rt, jitter: float = 0.0) -> Outcome:
    tags = program.tags
    try:
        eager_side, comp_side = _Side(program), _Side(program)
        mod = eager_side.mod
        g_eager, g_comp = mod.make_graph(0), comp_side.mod.make_graph(0)
    except Exception as err:  # noqa: BLE001 - a generator bug: report, do not count
        return Outcome(
            "eager_error", program.seed, f"build: {type(err).__name__}: {err}"[:200], traceback.format_exc(), tags
        )
    model, comp_model = eager_side.model, comp_side.model
    runner = gnnc.compile(comp_model) if program.use_compile_wrapper else None
    fallbacks: list[str] = []
    plans = 0
    gen = torch.Generator().manual_seed(program.seed)
    width = program.width
    for step in range(program.steps):
        if step:
            g_eager, g_comp = mod.make_graph(step), comp_side.mod.make_graph(step)
        if program.tied_inputs:
            x = torch.randint(-2, 3, (g_eager.num_nodes(), width), generator=gen).to(torch.get_default_dtype())
            x = (x + jitter * torch.randn(x.shape, generator=gen) if jitter else x).requires_grad_()
        else:
            x = (torch.randn(g_eager.num_nodes(), width, generator=gen) * program.scale).requires_grad_()
        params, c_params = eager_side.params(x), comp_side.params(x)
        try:
            e_out = _as_tuple(model(g_eager, x, None))
            loss_w = [torch.randn(o.shape, generator=gen) for o in e_out]
            e_grads = _grads(e_out, loss_w, params)
        except Exception as err:  # noqa: BLE001 - eager's error is the outcome, compared with compiled's
            e_err = f"{type(err).__name__}: {err}"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    comp_model(g_comp, x, True)
            except Exception:  # noqa: BLE001 - both raise: an agreement
                return Outcome("both_raise", program.seed, e_err[:200], traceback.format_exc(), tags)
            return Outcome("eager_error", program.seed, e_err[:200], traceback.format_exc(), tags)
        try:
            with (
                warnings.catch_warnings(record=True) as caught,
                contextlib.redirect_stderr(io.StringIO()),
                compiled_rt.recording() as recorded,
            ):
                warnings.simplefilter("always", gnnc.FallbackWarning)
                c_out = _as_tuple(runner(g_comp, x, None) if runner is not None else comp_model(g_comp, x, True))
                c_grads = _grads(c_out, loss_w, c_params)
            fallbacks += [
                _normalize_reason(str(w.message)) for w in caught if issubclass(w.category, gnnc.FallbackWarning)
            ]
            plans += sum(plan.module is not None for plan in recorded)
        except Exception as err:  # noqa: BLE001 - compiled raised where eager ran: the outcome
            return Outcome(
                "crash",
                program.seed,
                _normalize_reason(f"{type(err).__name__}: {err}"),
                f"step {step}\n" + traceback.format_exc(),
                tags,
            )
        try:
            _compare(e_out, c_out, f"step {step} forward")
            _compare(e_grads, c_grads, f"step {step} grad")
        except AssertionError as err:
            if (
                not jitter
                and program.dtype == "float64"
                and _within_rounding_noise(model, mod, step, x, loss_w, params, e_out, c_out, e_grads, c_grads)
            ):
                return Outcome(
                    "rounding",
                    program.seed,
                    str(err).splitlines()[0][:160],
                    f"within eager's own rounding noise (Monte Carlo arithmetic):\n{err}",
                    tags,
                )
            names = [f"param{i}" for i in range(len(params) - 1)] + ["x"]
            detail = str(err)
            m = re.match(r"step \d+ grad\[(\d+)\]", detail)
            if m:
                detail = f"(grad of {names[int(m.group(1))]}) " + detail
            return Outcome("mismatch", program.seed, detail.splitlines()[0][:160], detail, tags)
        if step + 1 < program.steps:
            eager_side.step(params, e_grads, step)
            comp_side.step(c_params, c_grads, step)
            with torch.no_grad():  # lockstep: see the module's docstring
                for mine, theirs in zip(comp_side.params(x)[:-1], eager_side.params(x)[:-1]):
                    mine.copy_(theirs)
    if fallbacks:
        return Outcome(
            "fallback", program.seed, sorted(set(fallbacks))[0], "\n".join(sorted(set(fallbacks))), tags, plans
        )
    return Outcome("match" if plans else "no_plan", program.seed, tags=tags, plans=plans)


def sample_seeds(base: int, count: int) -> list[int]:
    """Program seeds of a run (stable across versions of the CLI and the test)."""
    return [base * 1_000_003 + i for i in range(count)]
