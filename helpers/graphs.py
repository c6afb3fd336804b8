"""Draw an ONNX graph as a picture inside a notebook (introduced in notebook 00).

Plumbing only: notebook 00 teaches how to walk ``model.graph`` (nodes, initializers, inputs,
outputs) by hand; this module turns that same structure into a picture.

Why networkx + matplotlib: the classic route (pydot, the ``graphviz`` Python package, Netron's
desktop app) needs Graphviz's ``dot`` binary or a browser, which the test machines do not have.
networkx is pure Python, well maintained, already installed as a dependency of torch, and its
documented recipe for a DAG (``topological_generations`` to get layers, ``multipartite_layout`` to
place them) is exactly what a dataflow graph needs. matplotlib draws the boxes and arrows, so the
picture shows up inline in JupyterLab and in headless test runs alike.

Two functions:

* :func:`onnx_to_networkx` - a ``networkx.DiGraph`` with one node per graph input, operator and
  graph output (and per initializer if asked); edges are the named tensors between them, labelled
  with their inferred type and shape.
* :func:`draw_onnx_graph` - lays that graph out top to bottom and draws it.

networkx, matplotlib and onnx are imported inside the functions so that ``import helpers`` stays cheap.
"""
from __future__ import annotations

from typing import Any

KINDS = ("input", "initializer", "op", "output")
_COLORS = {"input": "#d9f2d9", "initializer": "#f2f2f2", "op": "#dbe9f6", "output": "#fde2c8"}
_FONT_PT = 8.0
_INTEGER_TYPES = (2, 3, 4, 5, 6, 7, 12, 13)  # TensorProto.UINT8 ... INT64, UINT32, UINT64


def _require_model(model: Any):
    import onnx

    if not isinstance(model, onnx.ModelProto):
        hint = " (load it first with onnx.load(path))" if isinstance(model, (str, bytes)) or hasattr(
            model, "__fspath__") else ""
        raise TypeError(f"expected an onnx.ModelProto{hint}, got {type(model).__module__}."
                        f"{type(model).__qualname__}")
    return model


def _type_str(type_proto) -> str:
    """``float[batch,784]`` for a tensor type; ``?`` when nothing is known."""
    import onnx

    if not type_proto.HasField("tensor_type"):
        return type_proto.WhichOneof("value") or "?"
    tensor = type_proto.tensor_type
    dtype = onnx.TensorProto.DataType.Name(tensor.elem_type).lower() if tensor.elem_type else "?"
    if not tensor.HasField("shape"):
        return f"{dtype}[...]"
    dims = [d.dim_param if d.HasField("dim_param") else str(d.dim_value) if d.HasField("dim_value") else "?"
            for d in tensor.shape.dim]
    return f"{dtype}[{','.join(dims)}]"


def _tensor_types(model) -> dict[str, str]:
    """Name -> type string for every tensor whose type is declared or can be inferred."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except (onnx.shape_inference.InferenceError, ValueError):
        inferred = model  # draw what is declared; the checker is the place to diagnose the model
    graph = inferred.graph
    types = {vi.name: _type_str(vi.type) for vi in (*graph.value_info, *graph.input, *graph.output)}
    for init in graph.initializer:
        dtype = onnx.TensorProto.DataType.Name(init.data_type).lower()
        types.setdefault(init.name, f"{dtype}[{','.join(str(d) for d in init.dims)}]")
    return types


def _slot_names(node, opsets: dict[str, int]) -> list[str]:
    """Formal input names of an operator (``A``, ``B``, ``C`` for Gemm), from its schema."""
    import onnx

    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain, 1), node.domain)
    except onnx.defs.SchemaError:
        return [f"in{i}" for i in range(len(node.input))]
    formal = [i.name for i in schema.inputs] or ["in"]
    return [formal[min(i, len(formal) - 1)] for i in range(len(node.input))]


def _changed_attributes(node, opsets: dict[str, int]) -> list[str]:
    """``transB=1`` for scalar attributes that differ from the schema default."""
    import onnx
    from onnx import helper

    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain, 1), node.domain)
        defaults = schema.attributes
    except onnx.defs.SchemaError:
        defaults = {}
    shown = []
    for attr in node.attribute:
        if attr.type not in (onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT, onnx.AttributeProto.STRING):
            continue
        value = helper.get_attribute_value(attr)
        default = defaults.get(attr.name)
        if default is not None and default.default_value.type == attr.type and \
                helper.get_attribute_value(default.default_value) == value:
            continue
        value = value.decode() if isinstance(value, bytes) else value
        shown.append(f"{attr.name}={value:g}" if isinstance(value, float) else f"{attr.name}={value}")
    return shown


def _initializer_summary(init, types: dict[str, str]) -> str:
    """``net.1.weight float[256,784]``; the value itself for a scalar or a short integer vector."""
    import numpy as np
    from onnx import numpy_helper

    size = int(np.prod(init.dims, dtype=np.int64))
    if size == 1 and not init.external_data:
        value = numpy_helper.to_array(init).reshape(-1)[0]
        return f"{init.name} = {value:.5g}" if np.issubdtype(value.dtype, np.floating) else f"{init.name} = {value}"
    if size <= 4 and init.dims and not init.external_data and init.data_type in _INTEGER_TYPES:
        return f"{init.name} = {numpy_helper.to_array(init).tolist()}"  # e.g. a Reshape target [-1, 784]
    return f"{init.name} {types.get(init.name, '?')}"


def onnx_to_networkx(model, *, initializers_as_nodes: bool = False):
    """The top-level graph of ``model`` as a ``networkx.DiGraph``.

    Node ids are strings: ``input:<name>``, ``init:<name>``, ``op:<index>`` (position in
    ``graph.node``) and ``output:<name>``. Each node has ``kind`` (one of :data:`KINDS`), ``label``
    (the text drawn in its box) and ``layer`` (its row, 0 at the top). Each edge has ``tensor`` (the
    name of the tensor that flows along it) and ``type`` (``float[batch,256]`` when known).

    Initializers are folded into the label of the operator that reads them (as Netron does), unless
    ``initializers_as_nodes`` is true. Subgraphs (``If``/``Loop`` bodies) are not expanded.

    Raises ``TypeError`` if ``model`` is not an ``onnx.ModelProto``, and ``ValueError`` if an
    operator reads a tensor that nothing produces (a dangling input).
    """
    import networkx as nx

    model = _require_model(model)
    graph = model.graph
    opsets = {o.domain: o.version for o in model.opset_import}
    opsets.setdefault("ai.onnx", opsets.get("", 1))
    types = _tensor_types(model)
    initializers = {init.name: init for init in graph.initializer}
    inputs = [vi.name for vi in graph.input if vi.name not in initializers]

    G = nx.DiGraph(name=graph.name or "graph")
    producer: dict[str, str] = {}  # tensor name -> node id that makes it
    for name in inputs:
        G.add_node(f"input:{name}", kind="input", label=f"{name}\n{types.get(name, '?')}")
        producer[name] = f"input:{name}"
    if initializers_as_nodes:
        for name in initializers:
            G.add_node(f"init:{name}", kind="initializer", label=_initializer_summary(initializers[name], types)
                       .replace(" ", "\n", 1))
            producer[name] = f"init:{name}"

    for index, node in enumerate(graph.node):
        node_id = f"op:{index}"
        header = node.op_type if not node.domain or node.domain == "ai.onnx" else f"{node.domain}.{node.op_type}"
        attributes = _changed_attributes(node, opsets)
        lines = [header + (f" ({', '.join(attributes)})" if attributes else "")]
        G.add_node(node_id, kind="op", label="", op_type=node.op_type, name=node.name)
        for slot, tensor in zip(_slot_names(node, opsets), node.input):
            if not tensor:  # an omitted optional input
                continue
            if tensor in initializers and not initializers_as_nodes:
                lines.append(f"{slot}: {_initializer_summary(initializers[tensor], types)}")
                continue
            if tensor not in producer:
                raise ValueError(f"node {index} ({node.op_type} {node.name!r}) reads tensor {tensor!r}, which "
                                 f"is not a graph input, an initializer or the output of an earlier node")
            G.add_edge(producer[tensor], node_id, tensor=tensor, type=types.get(tensor, "?"))
        G.nodes[node_id]["label"] = "\n".join(lines)
        for tensor in node.output:
            if tensor:
                producer[tensor] = node_id

    for vi in graph.output:
        out_id = f"output:{vi.name}"
        G.add_node(out_id, kind="output", label=f"{vi.name}\n{types.get(vi.name, '?')}")
        if vi.name not in producer:
            raise ValueError(f"graph output {vi.name!r} is not produced by any node, input or initializer")
        G.add_edge(producer[vi.name], out_id, tensor=vi.name, type=types.get(vi.name, "?"))

    # Rows: networkx's topological generations of the dataflow, as in its "DAG - Topological Layout"
    # example. Initializer boxes sit one row above the first operator that reads them.
    flow = G.subgraph(n for n, kind in G.nodes(data="kind") if kind != "initializer")
    for layer, nodes in enumerate(nx.topological_generations(flow)):
        for n in nodes:
            G.nodes[n]["layer"] = layer
    for n, kind in G.nodes(data="kind"):
        if kind == "initializer":
            consumers = [G.nodes[c]["layer"] for c in G.successors(n)]
            G.nodes[n]["layer"] = max(0, min(consumers) - 1) if consumers else 0
    return G


def draw_onnx_graph(model, *, initializers_as_nodes: bool = False, title: str | None = None,
                    max_width_in: float = 9.0):
    """Draw ``model``'s graph top to bottom (data flows down); returns the matplotlib figure.

    Boxes: green = graph inputs, grey = initializers (weights), blue = operators, orange = graph
    outputs. Arrows are tensors, labelled with their name and inferred ``type[shape]``.
    """
    import matplotlib.pyplot as plt
    import networkx as nx

    G = onnx_to_networkx(model, initializers_as_nodes=initializers_as_nodes)
    layers: dict[int, list[str]] = {}  # row -> its nodes in graph order (a dict keeps the order stable)
    for n, layer in sorted(G.nodes(data="layer"), key=lambda item: G.nodes[item[0]]["kind"] == "initializer"):
        layers.setdefault(layer, []).append(n)  # dataflow first, weights to its right
    pos = nx.multipartite_layout(G, subset_key=layers, align="horizontal")

    # Convert to inches: x from networkx (spread within a row), y from the rows' text heights.
    line_in = _FONT_PT * 1.3 / 72
    char_in = _FONT_PT * 0.62 / 72
    box_h = {n: line_in * (label.count("\n") + 1) + 0.12 for n, label in G.nodes(data="label")}
    box_w = {n: char_in * max(len(s) for s in label.split("\n")) + 0.15 for n, label in G.nodes(data="label")}
    row_gap = 0.42  # room for the arrow and its label between two rows
    y_center, top = {}, 0.0
    for layer in sorted(layers):
        height = max(box_h[n] for n in layers[layer])
        y_center[layer] = top - height / 2
        top -= height + row_gap
    total_h = -top - row_gap
    widest_row = max(sum(box_w[n] + 0.3 for n in row) for row in layers.values())
    xs = [p[0] for p in pos.values()]
    span = (max(xs) - min(xs)) or 1.0
    width = min(max_width_in, max(widest_row, max(box_w.values()) + 0.5))
    x_scale = max(0.0, width - max(box_w.values())) / span if len(set(xs)) > 1 else 0.0
    xy = {n: ((pos[n][0] - min(xs) - span / 2) * x_scale if len(set(xs)) > 1 else 0.0,
              y_center[G.nodes[n]["layer"]]) for n in G}

    fig_w = width + 1.6
    fig_h = total_h + (0.5 if title else 0.2)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    fig.set_layout_engine("none")
    ax.set_position((0, 0, 1, total_h / fig_h))
    ax.set_xlim(-fig_w / 2, fig_w / 2)
    ax.set_ylim(-total_h, 0)
    ax.axis("off")
    texts = {}
    for n, data in G.nodes(data=True):
        texts[n] = ax.text(*xy[n], data["label"], ha="center", va="center", fontsize=_FONT_PT,
                           family="monospace", zorder=3,
                           bbox=dict(boxstyle="round,pad=0.35", fc=_COLORS[data["kind"]], ec="#555555", lw=0.8))
    for u, v, data in G.edges(data=True):
        ax.annotate("", xy=(0.5, 1.0), xycoords=texts[v], xytext=(0.5, 0.0), textcoords=texts[u],
                    arrowprops=dict(arrowstyle="-|>", color="#444444", lw=0.9, shrinkA=3, shrinkB=3), zorder=2)
        if G.nodes[u]["kind"] == "op" and G.nodes[v]["kind"] == "op":
            x_mid = (xy[u][0] + xy[v][0]) / 2
            y_mid = (xy[u][1] - box_h[u] / 2 + xy[v][1] + box_h[v] / 2) / 2
            ax.text(x_mid + 0.08, y_mid, f"{data['tensor']}: {data['type']}", ha="left", va="center",
                    fontsize=_FONT_PT - 0.5, color="#333333", style="italic", zorder=4)
    if title:
        fig.suptitle(title, y=1 - 0.12 / fig_h, va="top", fontsize=10)
    plt.show()
    return fig
