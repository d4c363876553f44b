"""The agent's prompt: role, action space, interaction framework, hints, schemas and the task.

The action space is generated from the action classes, the database schema from the warehouse catalogue (the dbt
marts' documented columns, restricted to what the live file has) and the vectorstore schema from the live
collections, so the prompt describes what is actually there. Everything passes the environment's redaction, so no
absolute path of this machine reaches the model.
"""

from __future__ import annotations

from typing import Sequence

from agent.actions import (
    Action,
    CalculateExpr,
    ClassicRetrieve,
    CreateDynamicTool,
    GenerateAnswer,
    RetrieveFromDatabase,
    RetrieveFromVectorstore,
    RetrieveMathKnowledge,
    ViewImage,
)
from agent.backends import FILTER_FIELDS, FILTER_OPERATORS
from agent.env import AgentEnv
from agent.formats import render_action
from agent.task import Task

SYSTEM_ROLE = (
    "You are an expert research assistant. You answer questions about academic papers that have been parsed into "
    "a relational warehouse (DuckDB) and encoded into vector collections. You find evidence with the actions below, "
    "check it, compute exactly instead of estimating, and answer in the requested format."
)

_FORMAT_NAMES = {"markdown": "Python function-call syntax", "json": "JSON", "xml": "XML", "yaml": "YAML"}


def action_space(actions: Sequence[type[Action]], action_format: str) -> str:
    header = (
        f"[Action Space]\nWrite exactly one action per turn, in {_FORMAT_NAMES[action_format]}. "
        "The available actions are:"
    )
    return "\n\n".join([header, *(action.specification(action_format) for action in actions)])


def interaction_framework(action_format: str, actions: Sequence[type[Action]]) -> str:
    example_action = next((a for a in actions if a is not GenerateAnswer), GenerateAnswer)
    example = render_action(
        example_action.action_name(),
        dict(example_action.examples[0]) if example_action.examples else {},
        action_format,
    )
    return (
        "[Interaction Framework]\n"
        "You interact with the environment in turns (ReAct). In each turn write:\n"
        "[Thought]: your reasoning about what you know and what to do next\n"
        f"[Action]: one action in {_FORMAT_NAMES[action_format]}\n"
        "Then stop: the environment runs the action and replies with [Observation]: its result (rows, search hits, "
        "an image, a computed value, or a JSON error with the next valid step). Never write an [Observation] "
        "yourself. When you have the evidence, finish with GenerateAnswer.\n"
        f"Example turn:\n[Thought]: I should look at the candidate evidence first.\n[Action]:\n{example}"
    )


def hints(actions: Sequence[type[Action]]) -> str:
    lines = ["[Hints]"]
    if RetrieveFromDatabase in actions:
        lines += [
            "- SQL is DuckDB's dialect. Ids are UUIDs; restrict by paper with ref_paper_id (metadata.paper_id) and "
            "join pages on ref_page_id. Select only the columns you need and add LIMIT.",
            "- tables.table_content is HTML; table_cells has one row per cell when you need exact values.",
        ]
    if RetrieveFromVectorstore in actions or ClassicRetrieve in actions:
        lines += [
            "- Vector search finds cells by meaning (or by keywords in the BM25 collection); restrict it to the "
            "papers in question with a filter on pdf_id.",
        ]
    if ViewImage in actions:
        lines.append("- Figures are only fully visible with ViewImage; use the bounding_box from images or tables.")
    if CalculateExpr in actions:
        lines.append("- Use CalculateExpr for any arithmetic, and keep the precision the answer format asks for.")
    if RetrieveMathKnowledge in actions:
        lines.append(
            "- Formula workflow: RetrieveMathKnowledge -> CreateDynamicTool(formula_id) -> CallTool(tool_name, "
            "parameters). Each step needs the previous one."
        )
    lines.append("- The answer passed to GenerateAnswer must follow the answer format exactly.")
    if CreateDynamicTool in actions:
        lines.append("- RetrieveConstant gives values with units for the tools' parameters.")
    return "\n".join(lines)


def database_schema(env: AgentEnv) -> str:
    tables = env.catalogue()
    if not tables:
        return "[Database Schema]\nNo warehouse is available."
    blocks = ["[Database Schema]\nThe DuckDB warehouse has these tables (column: type, description):"]
    for table in tables:
        lines = [f"Table {table.name}: {table.description}".rstrip(": ")]
        for column in table.columns:
            encoded = f" [encoded as {column.encodable} in the vector collections]" if column.encodable else ""
            lines.append(f"- {column.name}: {column.data_type}, {column.description}{encoded}".rstrip(", "))
        blocks.append("\n".join(lines))
    return env.redact("\n\n".join(blocks))


def vectorstore_schema(env: AgentEnv) -> str:
    collections = env.collections()
    if not collections:
        return "[Vectorstore Schema]\nNo vector collections are available."
    lines = [
        "[Vectorstore Schema]",
        "Every entity has the fields " + ", ".join(FILTER_FIELDS) + " (pdf_id is metadata.paper_id; primary_key is "
        "the row id in table_name), plus text (text collections) or bbox (image collections).",
        "Filter operators: " + ", ".join(FILTER_OPERATORS) + "; strings in quotes, lists in brackets.",
        "Collections:",
    ]
    for collection in collections:
        views = collection.views or env.encodable_views(collection.modality)
        details = [
            f"{collection.modality}",
            f"model {collection.model}" if collection.model else "",
            f"metric {collection.metric}" if collection.metric else "",
            f"{collection.dimension} dimensions" if collection.dimension else "",
        ]
        lines.append(
            f"- {collection.name} ({', '.join(d for d in details if d)})"
            + (f": {collection.description}" if collection.description else "")
        )
        lines.append("  encoded views (table_name.column_name): " + ", ".join(f"{t}.{c}" for t, c in views))
    return env.redact("\n".join(lines))


def task_prompt(task: Task, env: AgentEnv, show_ids: bool = True) -> str:
    titles = env.titles(task.papers) if env.warehouse is not None and task.papers else {}

    def paper_line(paper_ids: list[str]) -> str:
        if show_ids:
            return "; ".join(f"{p} ({titles.get(p, 'title unknown')})" for p in paper_ids)
        return "; ".join(titles.get(p, p) for p in paper_ids)

    lines = [f"[Question]: {task.question}", f"[Answer Format]: {task.answer_format}"]
    if task.anchor_pdf:
        lines.append(f"[Anchor PDF]: {paper_line(task.anchor_pdf)}")
    if task.reference_pdf:
        lines.append(f"[Reference PDF]: {paper_line(task.reference_pdf)}")
    if task.conference:
        lines.append(f"[Conference]: {', '.join(task.conference)} (the answer is a paper of this volume)")
    return env.redact("\n".join(lines))


def system_prompt(env: AgentEnv, actions: Sequence[type[Action]], action_format: str) -> str:
    parts = [
        SYSTEM_ROLE,
        action_space(actions, action_format),
        interaction_framework(action_format, actions),
        hints(actions),
    ]
    if RetrieveFromDatabase in actions or ViewImage in actions:
        parts.append(database_schema(env))
    if RetrieveFromVectorstore in actions:
        parts.append(vectorstore_schema(env))
    return env.redact("\n\n".join(parts))
