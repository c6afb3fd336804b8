"""Draw an ONNX graph as a picture inside a notebook (introduced in notebook 00).

Plumbing only: notebook 00 shows how the edges follow from tensor names; this turns the same walk into a
picture with networkx (pure Python, already installed with torch) and matplotlib, so it needs neither
Graphviz's ``dot`` program nor a browser. For an interactive view, open the file in Netron (netron.app).
"""
from __future__ import annotations

COLORS = {"input": "#d9f2d9", "op": "#dbe9f6", "output": "#fde2c8"}


def onnx_to_networkx(model):
    """A ``networkx.DiGraph`` of ``model``'s top-level graph: one node per graph input, operator and output.

    An operator's label names the weights (initializers) it reads; edges carry the ``tensor`` name between two
    nodes. Raises ``TypeError`` for anything but an ``onnx.ModelProto`` and ``ValueError`` for a tensor that
    nothing produces.
    """
    import networkx as nx
    import onnx

    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"expected an onnx.ModelProto (load a file with onnx.load(path) first), "
                        f"got {type(model).__name__}")
    weights = {init.name for init in model.graph.initializer}
    G = nx.DiGraph()
    made_by = {}  # tensor name -> the graph node that writes it
    for vi in model.graph.input:
        if vi.name not in weights:
            G.add_node(f"input:{vi.name}", kind="input", label=vi.name)
            made_by[vi.name] = f"input:{vi.name}"
    for index, node in enumerate(model.graph.node):
        node_id = f"op:{index}"
        reads = [t for t in node.input if t in weights]
        G.add_node(node_id, kind="op", label="\n".join([node.op_type, *reads]))
        for tensor in node.input:
            if tensor and tensor not in weights:
                if tensor not in made_by:
                    raise ValueError(f"node {index} ({node.op_type}) reads {tensor!r}, which is not a graph input, "
                                     "an initializer or the output of an earlier node")
                G.add_edge(made_by[tensor], node_id, tensor=tensor)
        made_by.update({tensor: node_id for tensor in node.output})
    for vi in model.graph.output:
        if vi.name not in made_by:
            raise ValueError(f"graph output {vi.name!r} is not produced by any node or input")
        G.add_node(f"output:{vi.name}", kind="output", label=vi.name)
        G.add_edge(made_by[vi.name], f"output:{vi.name}", tensor=vi.name)
    return G


def draw_onnx_graph(model, title: str | None = None):
    """Draw ``model`` top to bottom (green inputs, blue operators, orange outputs); returns the figure."""
    import matplotlib.pyplot as plt
    import networkx as nx

    G = onnx_to_networkx(model)
    # networkx's recipe for a DAG: its topological generations are the rows
    for row, nodes in enumerate(nx.topological_generations(G)):
        for n in nodes:
            G.nodes[n]["row"] = row
    rows = max(row for _, row in G.nodes(data="row")) + 1
    pos = {n: (x, -y) for n, (y, x) in nx.multipartite_layout(G, subset_key="row").items()}
    fig, ax = plt.subplots(figsize=(4.5, 1.1 * rows + 0.4))
    nx.draw_networkx_edges(G, pos, ax=ax, arrows=True, arrowstyle="-|>", min_source_margin=14, min_target_margin=14)
    nx.draw_networkx_edge_labels(G, pos, nx.get_edge_attributes(G, "tensor"), ax=ax, font_size=7, rotate=False)
    for kind, color in COLORS.items():
        labels = {n: label for n, label in G.nodes(data="label") if G.nodes[n]["kind"] == kind}
        nx.draw_networkx_labels(G, pos, labels, ax=ax, font_size=8, font_family="monospace",
                                bbox=dict(boxstyle="round", fc=color, ec="#555555"))
    ax.set_title(title or model.graph.name, fontsize=10)
    ax.axis("off")
    plt.show()
    return fig
