"""Draw an ONNX graph in a notebook with networkx and matplotlib (notebook 00)."""

from __future__ import annotations


def onnx_to_networkx(model):
    """A ``networkx.DiGraph`` of inputs, operators and outputs, edges named by tensor (TypeError, ValueError)."""
    import networkx as nx
    import onnx

    if not isinstance(model, onnx.ModelProto):
        raise TypeError(
            f"expected an onnx.ModelProto (load a file with onnx.load(path) first), "
            f"got {type(model).__name__}"
        )
    weights = {init.name for init in model.graph.initializer}
    # tensor -> writer
    made_by = {vi.name: f"input:{vi.name}" for vi in model.graph.input if vi.name not in weights}
    G = nx.DiGraph()
    G.add_nodes_from((node, {"kind": "input", "label": name}) for name, node in made_by.items())
    for index, node in enumerate(model.graph.node):
        G.add_node(
            f"op:{index}",
            kind="op",
            label="\n".join([node.op_type, *(t for t in node.input if t in weights)]),
        )
        for tensor in (t for t in node.input if t and t not in weights):
            if tensor not in made_by:
                raise ValueError(
                    f"node {index} ({node.op_type}) reads {tensor!r}, which is not a graph input, "
                    "an initializer or the output of an earlier node"
                )
            G.add_edge(made_by[tensor], f"op:{index}", tensor=tensor)
        made_by.update({tensor: f"op:{index}" for tensor in node.output})
    for vi in model.graph.output:
        if vi.name not in made_by:
            raise ValueError(f"graph output {vi.name!r} is not produced by any node or input")
        G.add_node(f"output:{vi.name}", kind="output", label=vi.name)
        G.add_edge(made_by[vi.name], f"output:{vi.name}", tensor=vi.name)
    return G


def draw_onnx_graph(model, title: str | None = None, ax=None, names: bool = True):
    """Draw ``model`` top to bottom (green inputs, blue operators, orange outputs); returns the figure.

    Given ``ax`` (a matplotlib Axes), it draws there and leaves showing the figure to the caller, so several
    graphs can stand side by side; ``names=False`` labels operators with their type only and leaves the
    edges' tensor names out (a quantized graph's names are long)."""
    import matplotlib.pyplot as plt
    import networkx as nx

    G = onnx_to_networkx(model)
    # networkx's DAG recipe
    rows = {n: row for row, nodes in enumerate(nx.topological_generations(G)) for n in nodes}
    # an operator that reads only weights (a DequantizeLinear of a QDQ file) sits just above its reader
    for n in reversed(list(nx.topological_sort(G))):
        if G.nodes[n]["kind"] == "op" and G.in_degree(n) == 0:
            rows[n] = min(rows[s] for s in G.successors(n)) - 1
    nx.set_node_attributes(G, rows, "row")
    pos = {n: (x, -y) for n, (y, x) in nx.multipartite_layout(G, subset_key="row").items()}
    shown = ax is None
    if shown:
        _, ax = plt.subplots(figsize=(4.5, 1.1 * (max(rows.values()) + 1) + 0.4))
    nx.draw_networkx_edges(
        G, pos, ax=ax, arrows=True, arrowstyle="-|>", min_source_margin=14, min_target_margin=14
    )
    if names:
        nx.draw_networkx_edge_labels(
            G, pos, nx.get_edge_attributes(G, "tensor"), ax=ax, font_size=7, rotate=False
        )
    for kind, color in {"input": "#d9f2d9", "op": "#dbe9f6", "output": "#fde2c8"}.items():
        labels = {
            n: label if names or kind != "op" else label.split("\n")[0]
            for n, label in G.nodes(data="label")
            if G.nodes[n]["kind"] == kind
        }
        nx.draw_networkx_labels(
            G,
            pos,
            labels,
            ax=ax,
            font_size=8 if names else 7,
            font_family="monospace",
            bbox=dict(boxstyle="round", fc=color, ec="#555555"),
        )
    ax.set_title(title or model.graph.name, fontsize=10)
    if not names:
        # room for the widest operator name at the sides of a narrow panel
        ax.margins(x=0.45)
    ax.axis("off")
    if shown:
        plt.show()
    return ax.figure


def draw_graphs_side_by_side(models: dict):
    """``{title: onnx.ModelProto}`` drawn in one row, operator types only; returns the figure."""
    import matplotlib.pyplot as plt

    if not models:
        raise ValueError("expected at least one {title: onnx.ModelProto}, got none")
    graphs = {title: onnx_to_networkx(model) for title, model in models.items()}
    height = max(G.number_of_nodes() for G in graphs.values())
    fig, axes = plt.subplots(
        1, len(models), figsize=(4.2 * len(models), 0.4 * height + 1.5), squeeze=False
    )
    for ax, (title, model) in zip(axes[0], models.items()):
        draw_onnx_graph(model, title, ax=ax, names=False)
    plt.show()
    return fig
