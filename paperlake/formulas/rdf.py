"""The formula graph as RDF (Turtle), with a small ontology, and SPARQL over it.

Ontology (namespace ``pl: <https://paperlake.dev/ontology#>``; instances under ``https://paperlake.dev/id/``):

Classes
    ``pl:Formula``     a mathematical formula, one entity however many papers write it
    ``pl:Occurrence``  one place a formula is written: an equation (row) on a page of a paper
    ``pl:Paper``       a paper (its id is the AirQA paper id used across paperlake)
    ``pl:Constant``    a named value: a standard constant (π, ħ, k_B …) or one a paper fixes in its text
    ``pl:Parameter``   an input of a formula

Object properties
    ``pl:hasOccurrence``  Formula → Occurrence
    ``pl:occursIn``       Formula → Paper (shortcut through its occurrences)
    ``pl:inPaper``        Occurrence → Paper
    ``pl:hasParameter``   Formula → Parameter
    ``pl:usesConstant``   Formula → Constant
    ``pl:sameAs``         Occurrence → Occurrence: the same formula written in another paper
    ``pl:derivedFrom``    Formula → Formula: uses the quantity the other defines (same paper)
    ``pl:specializes``    Formula → Formula: the other with some symbols fixed to numbers

Datatype properties
    ``rdfs:label`` (Formula, Constant), ``pl:latex``, ``pl:normalisedLatex``, ``pl:sympy``, ``pl:template``,
    ``pl:output``, ``pl:status``, ``pl:reason`` (Formula); ``pl:name`` (Parameter, Constant), ``pl:latexSymbol``,
    ``pl:description``, ``pl:defaultValue`` (Parameter); ``pl:value`` (xsd:double), ``pl:unit``, ``pl:source``
    (Constant); ``pl:page`` (xsd:integer), ``pl:equationNumber``, ``pl:equationId``, ``pl:matchedBy``
    (Occurrence). Why two formulas are related (the evidence) stays in the warehouse table ``formula_relations``.

The ontology's own triples (classes and properties with ``rdfs:comment``) are written into every Turtle
document, so the file explains itself.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from rdflib import RDF, RDFS, XSD, Graph, Literal, Namespace, URIRef
from rdflib.namespace import OWL

from paperlake.formulas.graph import FormulaGraph
from paperlake.formulas.model import Formula, Relation, constant_id_for

PL = Namespace("https://paperlake.dev/ontology#")
ID = Namespace("https://paperlake.dev/id/")

CLASSES = {
    "Formula": "A mathematical formula, one entity however many papers write it.",
    "Occurrence": "One place a formula is written: an equation on a page of a paper.",
    "Paper": "A paper, identified by its AirQA paper id.",
    "Constant": "A named value: a standard constant or one a paper fixes in its text.",
    "Parameter": "An input of a formula.",
}
OBJECT_PROPERTIES = {
    "hasOccurrence": ("Formula", "Occurrence", "Where the formula is written."),
    "occursIn": ("Formula", "Paper", "A paper the formula is written in."),
    "inPaper": ("Occurrence", "Paper", "The paper of the occurrence."),
    "hasParameter": ("Formula", "Parameter", "An input of the formula."),
    "usesConstant": ("Formula", "Constant", "A constant the formula depends on."),
    "sameAs": ("Occurrence", "Occurrence", "The same formula written in another paper."),
    "derivedFrom": ("Formula", "Formula", "Uses the quantity the other formula defines."),
    "specializes": ("Formula", "Formula", "The other formula with some symbols fixed to numbers."),
}
DATATYPE_PROPERTIES = {
    "latex": "LaTeX as first seen.",
    "normalisedLatex": "Compact normalised LaTeX.",
    "sympy": "sympy form.",
    "template": "Python template run by safe_eval.",
    "output": "Name of the computed quantity.",
    "status": "templated | validated | not_computable | failed.",
    "reason": "Why not computable or failed.",
    "name": "Identifier.",
    "latexSymbol": "The symbol as written.",
    "description": "Meaning from the text.",
    "defaultValue": "Value fixed by the paper's text.",
    "value": "Numeric value.",
    "unit": "Unit.",
    "source": "standard or context.",
    "page": "Page number, from 1.",
    "equationNumber": "Number printed.",
    "equationId": "Id of the equation row in the lake.",
    "matchedBy": "How the occurrence joined its formula.",
}
_RELATION_PREDICATES = {"same_as": PL.sameAs, "derived_from": PL.derivedFrom, "specializes": PL.specializes}


def ontology() -> Graph:
    """The ontology's own triples."""
    graph = Graph()
    graph.bind("pl", PL)
    for name, comment in CLASSES.items():
        graph.add((PL[name], RDF.type, OWL.Class))
        graph.add((PL[name], RDFS.comment, Literal(comment)))
    for name, (domain, range_, comment) in OBJECT_PROPERTIES.items():
        graph.add((PL[name], RDF.type, OWL.ObjectProperty))
        graph.add((PL[name], RDFS.domain, PL[domain]))
        graph.add((PL[name], RDFS.range, PL[range_]))
        graph.add((PL[name], RDFS.comment, Literal(comment)))
    for name, comment in DATATYPE_PROPERTIES.items():
        graph.add((PL[name], RDF.type, OWL.DatatypeProperty))
        graph.add((PL[name], RDFS.comment, Literal(comment)))
    return graph


def _node(kind: str, identifier: str) -> URIRef:
    return ID[f"{kind}/{identifier}"]


def to_rdf(formula_graph: FormulaGraph) -> Graph:
    graph = ontology()
    graph.bind("pl_id", ID)
    for formula in formula_graph.formulas.values():
        _add_formula(graph, formula)
    for relation in formula_graph.relations.values():
        _add_relation(graph, relation)
    return graph


def _add_formula(graph: Graph, formula: Formula) -> None:
    """The formula's own triples: itself, its parameters, occurrences (and their papers) and constants."""
    subject = _node("formula", formula.formula_id)
    graph.add((subject, RDF.type, PL.Formula))
    graph.add((subject, RDFS.label, Literal(formula.label)))
    graph.add((subject, PL.latex, Literal(formula.latex)))
    graph.add((subject, PL.normalisedLatex, Literal(formula.normalised_latex)))
    graph.add((subject, PL.status, Literal(formula.status)))
    for predicate, value in (
        (PL.sympy, formula.sympy_str),
        (PL.template, formula.template),
        (PL.output, formula.output),
        (PL.reason, formula.reason),
    ):
        if value:
            graph.add((subject, predicate, Literal(value)))
    for position, parameter in enumerate(formula.parameters):
        node = _node("parameter", f"{formula.formula_id}/{position}")
        graph.add((subject, PL.hasParameter, node))
        graph.add((node, RDF.type, PL.Parameter))
        graph.add((node, PL.name, Literal(parameter.name)))
        if parameter.latex_symbol:
            graph.add((node, PL.latexSymbol, Literal(parameter.latex_symbol)))
        if parameter.description:
            graph.add((node, PL.description, Literal(parameter.description)))
        if parameter.default is not None:
            graph.add((node, PL.defaultValue, Literal(parameter.default, datatype=XSD.double)))
    for occurrence in formula.occurrences:
        node, paper = _node("occurrence", occurrence.occurrence_id), _node("paper", occurrence.paper_id)
        graph.add((subject, PL.hasOccurrence, node))
        graph.add((subject, PL.occursIn, paper))
        graph.add((paper, RDF.type, PL.Paper))
        graph.add((node, RDF.type, PL.Occurrence))
        graph.add((node, PL.inPaper, paper))
        graph.add((node, PL.equationId, Literal(occurrence.equation_id)))
        graph.add((node, PL.matchedBy, Literal(occurrence.matched_by)))
        if occurrence.page_number is not None:
            graph.add((node, PL.page, Literal(int(occurrence.page_number), datatype=XSD.integer)))
        if occurrence.equation_number:
            graph.add((node, PL.equationNumber, Literal(occurrence.equation_number)))
    for constant in formula.constants:
        node = _node("constant", constant_id_for(constant))
        graph.add((subject, PL.usesConstant, node))
        graph.add((node, RDF.type, PL.Constant))
        graph.add((node, PL.name, Literal(constant.name)))
        graph.add((node, PL.value, Literal(constant.value, datatype=XSD.double)))
        graph.add((node, PL.source, Literal(constant.source)))
        if constant.description:
            graph.add((node, RDFS.label, Literal(constant.description)))
        if constant.unit:
            graph.add((node, PL.unit, Literal(constant.unit)))


def _add_relation(graph: Graph, relation: Relation) -> None:
    predicate = _RELATION_PREDICATES.get(relation.type)
    if predicate is not None:
        kind = "occurrence" if relation.type == "same_as" else "formula"
        graph.add((_node(kind, relation.source), predicate, _node(kind, relation.target)))


def to_turtle(formula_graph: FormulaGraph, blocks: dict[str, tuple[str, str]] | None = None) -> str:
    """The graph (and the ontology) as one Turtle document: the ontology, then one block of statements per
    formula (its triples, and the relations it is the source of) in N-Triples form, which Turtle admits, in
    formula-id order. ``blocks`` (formula id → (digest of what the block states, the block)) holds blocks written
    before and receives the current ones: a formula that did not change is not serialised again, so adding a
    paper to a large graph serialises only the formulas it touches. The document parses to :func:`to_rdf`'s
    graph."""
    blocks = {} if blocks is None else blocks
    occurrence_owner = {
        occurrence.occurrence_id: formula.formula_id
        for formula in formula_graph.formulas.values()
        for occurrence in formula.occurrences
    }
    owned: dict[str, list[Relation]] = {}
    for relation in formula_graph.relations.values():
        if relation.type in _RELATION_PREDICATES:
            owner = occurrence_owner.get(relation.source) if relation.type == "same_as" else relation.source
            owned.setdefault(owner or "", []).append(relation)  # "": a relation whose source has no formula
    current: dict[str, tuple[str, str]] = {}
    for formula_id in sorted(formula_graph.formulas.keys() | owned.keys()):
        formula = formula_graph.formulas.get(formula_id)
        relations = sorted(owned.get(formula_id, []), key=lambda r: (r.type, r.source, r.target))
        digest = _block_digest(formula, relations)
        cached = blocks.get(formula_id)
        if cached is None or cached[0] != digest:
            graph = Graph()
            if formula is not None:
                _add_formula(graph, formula)
            for relation in relations:
                _add_relation(graph, relation)
            cached = (digest, "".join(sorted(graph.serialize(format="nt").splitlines(keepends=True))))
        current[formula_id] = cached
    blocks.clear()
    blocks.update(current)
    return _ontology_turtle() + "\n" + "".join(block for _, block in current.values())


# Bump when what a formula's block states changes (_add_formula, _add_relation): every block is serialised again.
RDF_BLOCK_VERSION = 1


def _block_digest(formula: Formula | None, relations: list[Relation]) -> str:
    """What a formula's block states: the fields :func:`_add_formula` and :func:`_add_relation` write."""
    parts: list[object] = [RDF_BLOCK_VERSION, [(r.type, r.source, r.target) for r in relations]]
    if formula is not None:
        parts += [
            (formula.formula_id, formula.label, formula.latex, formula.normalised_latex, formula.status),
            (formula.sympy_str, formula.template, formula.output, formula.reason),
            [(p.name, p.latex_symbol, p.description, p.default) for p in formula.parameters],
            [
                (o.occurrence_id, o.paper_id, o.equation_id, o.matched_by, o.page_number, o.equation_number)
                for o in formula.occurrences
            ],
            [(constant_id_for(c), c.name, c.value, c.source, c.description, c.unit) for c in formula.constants],
        ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


@lru_cache(maxsize=1)
def _ontology_turtle() -> str:
    graph = ontology()
    graph.bind("pl_id", ID)
    return graph.serialize(format="turtle")


FORMULAS_USING_CONSTANT = """
PREFIX pl: <https://paperlake.dev/ontology#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
SELECT DISTINCT ?formula ?label ?latex WHERE {
    ?formula a pl:Formula ;
             pl:usesConstant ?constant ;
             rdfs:label ?label ;
             pl:normalisedLatex ?latex .
    ?constant pl:name ?name .
}
ORDER BY ?formula
"""


def formulas_using_constant(turtle_text: str, constant_name: str) -> list[dict[str, str]]:
    """Formulas that use the constant named ``constant_name`` (``hbar``, ``pi``, ``tau`` …), via SPARQL."""
    graph = Graph()
    graph.parse(data=turtle_text, format="turtle")
    rows = graph.query(FORMULAS_USING_CONSTANT, initBindings={"name": Literal(constant_name)})
    prefix = str(ID["formula/"])
    return [
        {"formula_id": str(row.formula).removeprefix(prefix), "label": str(row.label), "latex": str(row.latex)}
        for row in rows
    ]
