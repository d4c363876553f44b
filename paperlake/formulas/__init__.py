"""Formula library: LaTeX → sympy → templates, canonical keys, the formula graph, RDF and agent tools."""
