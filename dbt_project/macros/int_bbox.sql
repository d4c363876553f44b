{# [x0, y0, w, h] in PDF points, rounded to whole points as NeuSym-RAG stores them. #}
{% macro int_bbox(column) -%}
    [round({{ column }}[1])::integer, round({{ column }}[2])::integer, round({{ column }}[3])::integer, round({{ column }}[4])::integer]::integer[4]
{%- endmacro %}
