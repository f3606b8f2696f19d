"""A detector's SQL, from DuckDB's dialect to Spark SQL, by sqlglot: one file per detector stays
the one source of truth, whichever engine runs it.

sqlglot parses the detector as DuckDB wrote it and writes it as Spark reads it. What it cannot
say right by itself is done here, on its syntax tree, before it writes (each rule is a DuckDB
construct with a Spark equivalent of the same meaning; `queries/README.md` lists them):

- the shared macros of ``analyzer/sql/classify.sql`` (``lf_finish_reason``...) are expanded in
  place: Spark has no SQL macros, and the rules stay written once;
- ``list(x ORDER BY k)`` keeps its order: the pairs (k, x) are collected, sorted, and x taken;
- ``string_agg(DISTINCT x, sep ORDER BY x)`` is the sorted set of x, joined (Spark's
  ``listagg(DISTINCT ...)`` fails beside another DISTINCT or FILTER aggregate);
- ``format('{:,}', n)`` and ``format('{:,.2f}', x)`` (thousands separators) become
  ``format_number``; other format strings are refused;
- ``epoch(ts)`` keeps its fraction of a second (``unix_micros``, not ``unix_timestamp``);
- ``json_object(...)`` becomes ``to_json(named_struct(...))`` with null fields kept;
- ``list[$i]`` is 1-based in DuckDB; Spark's ``[i]`` is 0-based, and sqlglot shifts only a
  literal number, so an index that is a parameter or an expression becomes ``element_at``
  (1-based);
- ``$name`` parameters become Spark's named markers ``:name``, bound the same way.

A construct with no rule and no translation is an error naming the detector's file, never a
query that runs with another meaning.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, SqlglotError

from analyzer.errors import ForensicsError

CLASSIFY = Path(__file__).resolve().parents[1] / "sql" / "classify.sql"
SPARK = Dialect.get_or_raise("spark")
_FORMATS = {"{:,}": 0, **{f"{{:,.{n}f}}": n for n in range(7)}}


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...]
    body: exp.Expression


@cache
def macros() -> dict[str, Macro]:
    """The shared macros (``classify.sql``), by name."""
    found: dict[str, Macro] = {}
    for statement in sqlglot.parse(CLASSIFY.read_text(encoding="utf-8"), read="duckdb"):
        if not isinstance(statement, exp.Create) or str(statement.args.get("kind")) != "MACRO":
            continue
        udf = statement.this
        name = udf.this.name.lower()
        params = tuple(p.name.lower() for p in udf.expressions)
        found[name] = Macro(name, params, statement.expression)
    return found


def _expand(node: exp.Expression) -> exp.Expression:
    """A call of a shared macro, replaced by its body with the arguments put in."""
    if not isinstance(node, exp.Anonymous):
        return node
    macro = macros().get(str(node.this).lower())
    if macro is None:
        return node
    args = node.expressions
    if len(args) != len(macro.params):
        raise SqlglotError(f"{macro.name} takes {len(macro.params)} arguments, not {len(args)}")
    given = dict(zip(macro.params, args, strict=True))

    def put(inner: exp.Expression) -> exp.Expression:
        if isinstance(inner, exp.Column) and not inner.table and inner.name.lower() in given:
            return exp.paren(given[inner.name.lower()].copy(), copy=False)
        return inner

    body = macro.body.copy().transform(put)
    return exp.paren(body.transform(_expand), copy=False)


def _template(spark_sql: str, *parts: exp.Expression) -> exp.Expression:
    """A Spark expression with ``__0``, ``__1``... standing for ``parts``."""
    tree = sqlglot.parse_one(spark_sql, read="spark")

    def put(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and re.fullmatch(r"__\d+", node.name):
            return parts[int(node.name[2:])].copy()
        return node

    return tree.transform(put)


def _sorted_values(
    value: exp.Expression, keys: list[exp.Expression], where: exp.Expression | None
) -> exp.Expression:
    """The values of a group as an array in the order of ``keys`` (each ascending): the pairs
    (keys, value) are collected (nulls kept, as DuckDB's list keeps them), sorted, and the
    value taken."""
    if any(k.args.get("desc") for k in keys):
        raise SqlglotError("an aggregate ordered DESC has no Spark rule (sort ascending)")
    fields: list[exp.Expression] = []
    for i, key in enumerate(keys):
        fields += [exp.Literal.string(f"k{i}"), key.this]
    fields += [exp.Literal.string("v"), value]
    pairs: exp.Expression = exp.Anonymous(
        this="collect_list", expressions=[exp.Anonymous(this="named_struct", expressions=fields)]
    )
    if where is not None:
        pairs = exp.Filter(this=pairs, expression=where.copy())
    return _template("transform(array_sort(__0), e -> e.v)", pairs)


def _ordered_list(node: exp.Expression) -> exp.Expression:
    """``list(x ORDER BY k1, k2) [FILTER (WHERE p)]`` -> the values of the sorted pairs."""
    agg, where = (node.this, node.expression) if isinstance(node, exp.Filter) else (node, None)
    if not isinstance(agg, exp.ArrayAgg) or not isinstance(agg.this, exp.Order):
        return node
    return _sorted_values(agg.this.this, agg.this.expressions, where)


def _string_agg(node: exp.Expression) -> exp.Expression:
    """``string_agg(DISTINCT x, sep [ORDER BY x])`` -> the sorted set of x joined (NULL for no
    value, as DuckDB's); ``string_agg(x, sep ORDER BY k)`` -> the sorted values joined. Spark's
    own ``listagg(DISTINCT ...)`` fails beside another DISTINCT or FILTER aggregate."""
    agg, where = (node.this, node.expression) if isinstance(node, exp.Filter) else (node, None)
    if not isinstance(agg, exp.GroupConcat):
        return node
    inner, keys = agg.this, []
    if isinstance(inner, exp.Order):
        inner, keys = inner.this, inner.expressions
    sep = agg.args.get("separator") or exp.Literal.string(",")
    if isinstance(inner, exp.Distinct):
        if len(inner.expressions) != 1:
            raise SqlglotError("string_agg(DISTINCT ...) has a Spark rule for one value only")
        value = inner.expressions[0]
        if any(k.this != value or k.args.get("desc") for k in keys):
            raise SqlglotError("string_agg(DISTINCT x ORDER BY y) has no Spark rule (order by x)")
        values: exp.Expression = exp.Anonymous(this="collect_set", expressions=[value])
        if where is not None:
            values = exp.Filter(this=values, expression=where.copy())
        values = exp.Anonymous(this="array_sort", expressions=[values])
    elif keys:
        values = _sorted_values(inner, keys, where)
    else:
        raise SqlglotError("string_agg() without ORDER BY has no defined order: add one")
    return _template("CASE WHEN size(__0) > 0 THEN array_join(__0, __1) END", values, sep)


def _format(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.Format):
        return node
    pattern = node.this
    if not (isinstance(pattern, exp.Literal) and pattern.is_string) or len(node.expressions) != 1:
        raise SqlglotError("format() has a Spark rule only for one value and a literal pattern")
    digits = _FORMATS.get(pattern.this)
    if digits is None:
        raise SqlglotError(f"format({pattern.this!r}, ...) has no Spark rule")
    return exp.Anonymous(
        this="format_number", expressions=[node.expressions[0], exp.Literal.number(digits)]
    )


def _epoch(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.TimeToUnix):
        return node
    return _template("unix_micros(CAST(__0 AS TIMESTAMP)) / 1000000.0", node.this)


def _struct(node: exp.JSONObject) -> exp.Expression:
    fields: list[exp.Expression] = []
    for pair in node.expressions:
        if not isinstance(pair, exp.JSONKeyValue):
            raise SqlglotError("json_object() has a Spark rule only for key, value pairs")
        fields += [pair.this, pair.expression]
    return exp.Anonymous(this="named_struct", expressions=fields)


def _json(node: exp.Expression) -> exp.Expression:
    """The outermost ``json_object`` becomes JSON text; any inside it (a list of objects, an
    object in an object) stay structs, so the text nests as DuckDB's does."""
    if not isinstance(node, exp.JSONObject) or node.find_ancestor(exp.JSONObject):
        return node
    inner = [n for n in node.find_all(exp.JSONObject) if n is not node]
    for nested in reversed(inner):  # the deepest first
        nested.replace(_struct(nested))
    return _template("to_json(__0, map('ignoreNullFields', 'false'))", _struct(node))


def _element(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.Bracket) or len(node.expressions) != 1:
        return node
    index = node.expressions[0]
    if isinstance(index, exp.Literal):
        return node  # a number sqlglot shifts to Spark's 0-based [i] itself; or a field name
    return exp.Anonymous(this="element_at", expressions=[node.this, index])


RULES: tuple[Callable[[exp.Expression], exp.Expression], ...] = (
    _ordered_list,
    _string_agg,
    _format,
    _epoch,
    _json,
    _element,
)


def to_spark(sql: str, path: Path | None = None) -> str:
    """``sql`` (one DuckDB query) as Spark SQL; an error names ``path`` when it cannot."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
        tree = tree.transform(_expand)
        for rule in RULES:
            tree = tree.transform(rule)
        # the generator of Spark's dialect (as sqlglot's Expression.sql calls it)
        return SPARK.generate(tree, unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ForensicsError(f"does not translate to Spark SQL: {first}", path=path) from exc
