"""A policy's expressions evaluated in Python, as DuckDB evaluates them, for a live guard that
must answer before DuckDB could even be imported (the Claude Code hook).

``compile_expr(sql)`` gives a function of one call's row (column name: value as the guard holds
it; int, str, bool, ``Decimal`` for ``cost_usd``, ``datetime`` for ``ts``, None for NULL) that
returns what DuckDB returns for ``SELECT <sql> FROM <the row, its columns of their
EVENT_COLUMNS types>``; or None where the expression uses anything this module does not know,
or mixes types in a way DuckDB might read otherwise (a string beside a number, say): the
guard then asks DuckDB, as it always did. ``tests/test_guard_expr.py`` holds every preset's
expressions and many more to DuckDB's answers over random rows.

What it knows: column names (any case), integer, decimal and string literals, NULL, TRUE,
FALSE, parentheses, NOT/AND/OR (three-valued), = <> != < <= > >=, IS [NOT] NULL, IS [NOT]
DISTINCT FROM, [NOT] IN (list), [NOT] BETWEEN, [NOT] LIKE 'literal', CASE (searched and
simple), coalesce, greatest, least, abs, lower, upper, length, starts_with, contains, ||,
+ - * / % and unary minus, CAST(x AS type) and x::type (DOUBLE, BIGINT, INTEGER, VARCHAR,
BOOLEAN). Where a value itself is out of what is mirrored (an integer overflow, a string of
more than ASCII for lower/upper/length/LIKE), the function raises ``Unsure``: ask DuckDB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from analyzer.guards.primitives.base import EVENT_COLUMNS

Row = Mapping[str, Any]
Fn = Callable[[Row], Any]


class Unsure(Exception):
    """A value this module does not mirror DuckDB on (an overflow, a non-ASCII string where
    DuckDB's Unicode rules apply): evaluate that row with DuckDB."""


class _Refused(Exception):
    """The expression is not one this module compiles."""


# Types: DuckDB's names, DECIMAL without its width, NULL for an untyped NULL.
_INT_RANGE = {"INTEGER": 2**31, "BIGINT": 2**63}
_NUMERIC = ("INTEGER", "BIGINT", "DECIMAL", "DOUBLE")  # in order of promotion
_CASTS = {
    "DOUBLE": "DOUBLE",
    "FLOAT8": "DOUBLE",
    "BIGINT": "BIGINT",
    "INT8": "BIGINT",
    "INTEGER": "INTEGER",
    "INT": "INTEGER",
    "INT4": "INTEGER",
    "VARCHAR": "VARCHAR",
    "TEXT": "VARCHAR",
    "STRING": "VARCHAR",
    "BOOLEAN": "BOOLEAN",
    "BOOL": "BOOLEAN",
}
_TYPES = {name: ("DECIMAL" if t.startswith("DECIMAL") else t) for name, t in EVENT_COLUMNS.items()}

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<num>\d+(?:\.\d*)?|\.\d+)(?![\w.])"
    r"|(?P<str>'(?:[^']|'')*')"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><>|!=|<=|>=|\|\||::|[=<>+\-*/%(),])"
    r")"
)
_KEYWORDS = {
    "AND",
    "OR",
    "NOT",
    "IS",
    "NULL",
    "TRUE",
    "FALSE",
    "IN",
    "BETWEEN",
    "LIKE",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "CAST",
    "AS",
    "DISTINCT",
    "FROM",
}


@dataclass(frozen=True)
class _Tok:
    kind: str  # num, str, name, kw, op, end
    text: str


def _tokens(sql: str) -> list[_Tok]:
    bare = re.sub(r"'(?:[^']|'')*'", "''", sql)
    if "--" in bare or "/*" in bare:
        raise _Refused("a comment")  # (not a minus twice, nor a division)
    out = []
    pos = 0
    while pos < len(sql):
        if sql[pos:].strip() == "":
            break
        m = _TOKEN.match(sql, pos)
        if m is None or m.end() == pos:
            raise _Refused(sql[pos:])
        pos = m.end()
        kind = m.lastgroup or ""
        text = m.group(kind)
        if kind == "name" and text.upper() in _KEYWORDS:
            out.append(_Tok("kw", text.upper()))
        else:
            out.append(_Tok(kind, text))
    out.append(_Tok("end", ""))
    return out


@dataclass(frozen=True)
class _E:
    """A compiled expression: its function and its DuckDB type."""

    fn: Fn
    type: str


# -- values ---------------------------------------------------------------------------------
def _checked(value: int, kind: str) -> int:
    limit = _INT_RANGE[kind]
    if not -limit <= value < limit:
        raise Unsure(f"{kind} out of range")
    return value


def _decimal_to_double(d: Decimal) -> float:
    """DECIMAL(18,10) to DOUBLE as DuckDB casts it: the unscaled integer over 10^scale."""
    exp = d.as_tuple().exponent
    scale = -exp if isinstance(exp, int) and exp < 0 else 0
    unscaled = int(d.scaleb(scale))
    return float(unscaled) / float(10**scale)


def _to_double(value: Any, kind: str) -> float:
    if kind == "DECIMAL":
        return _decimal_to_double(value)
    return float(value)


def _converter(src: str, dst: str) -> Callable[[Any], Any] | None:
    """How a non-NULL value of type ``src`` becomes one of ``dst`` when DuckDB unifies them
    (None: no change)."""
    if src == dst or src == "NULL":
        return None
    if dst == "DOUBLE":
        return lambda v: _to_double(v, src)
    if dst == "DECIMAL":
        return Decimal
    return None  # an integer widened: the same Python int


def _unify(types: list[str]) -> str:
    """The type DuckDB gives values of ``types`` compared or put together (refused where
    unsure)."""
    known = {t for t in types if t != "NULL"}
    if not known:
        return "NULL"
    if len(known) == 1:
        return known.pop()
    if known <= set(_NUMERIC):
        return max(known, key=_NUMERIC.index)
    raise _Refused(f"mixed types {sorted(known)}")


def _coerced(e: _E, dst: str) -> Fn:
    conv = _converter(e.type, dst)
    if conv is None:
        return e.fn
    fn = e.fn

    def run(row: Row) -> Any:
        v = fn(row)
        return None if v is None else conv(v)

    return run


def _boolean(e: _E) -> _E:
    if e.type not in ("BOOLEAN", "NULL"):
        raise _Refused(f"{e.type} where a boolean is needed")
    return e


# -- the parser -----------------------------------------------------------------------------
class _Parser:
    def __init__(self, sql: str) -> None:
        self.toks = _tokens(sql)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def take(self, kind: str, text: str | None = None) -> bool:
        t = self.tok
        if t.kind == kind and (text is None or t.text == text):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, text: str | None = None) -> None:
        if not self.take(kind, text):
            raise _Refused(f"expected {text or kind} at {self.tok.text!r}")

    def whole(self) -> _E:
        e = self.or_()
        if self.tok.kind != "end":
            raise _Refused(f"unexpected {self.tok.text!r}")
        return e

    # NOT, AND, OR (three-valued)
    def or_(self) -> _E:
        parts = [self.and_()]
        while self.take("kw", "OR"):
            parts.append(self.and_())
        if len(parts) == 1:
            return parts[0]
        fns = [_boolean(p).fn for p in parts]

        def run(row: Row) -> bool | None:
            unknown = False
            for f in fns:
                v = f(row)
                if v is True:
                    return True
                if v is None:
                    unknown = True
            return None if unknown else False

        return _E(run, "BOOLEAN")

    def and_(self) -> _E:
        parts = [self.not_()]
        while self.take("kw", "AND"):
            parts.append(self.not_())
        if len(parts) == 1:
            return parts[0]
        fns = [_boolean(p).fn for p in parts]

        def run(row: Row) -> bool | None:
            unknown = False
            for f in fns:
                v = f(row)
                if v is False:
                    return False
                if v is None:
                    unknown = True
            return None if unknown else True

        return _E(run, "BOOLEAN")

    def not_(self) -> _E:
        if self.take("kw", "NOT"):
            fn = _boolean(self.not_()).fn

            def run(row: Row) -> bool | None:
                v = fn(row)
                return None if v is None else not v

            return _E(run, "BOOLEAN")
        return self.is_()

    # IS [NOT] NULL, IS [NOT] DISTINCT FROM
    def is_(self) -> _E:
        e = self.cmp()
        while self.take("kw", "IS"):
            negate = self.take("kw", "NOT")
            if self.take("kw", "NULL"):
                e = _E(_is_null(e.fn, negate), "BOOLEAN")
                continue
            self.expect("kw", "DISTINCT")
            self.expect("kw", "FROM")
            right = self.cmp()
            kind = _unify([e.type, right.type])
            a, b = _coerced(e, kind), _coerced(right, kind)

            def distinct(row: Row, a: Fn = a, b: Fn = b, negate: bool = negate) -> bool:
                x, y = a(row), b(row)
                differ = (x is None) != (y is None) or (x is not None and x != y)
                return not differ if negate else differ

            e = _E(distinct, "BOOLEAN")
        return e

    # = <> != < <= > >=
    def cmp(self) -> _E:
        left = self.between()
        t = self.tok
        if t.kind == "op" and t.text in ("=", "<>", "!=", "<", "<=", ">", ">="):
            self.i += 1
            right = self.between()
            nt = self.tok
            if nt.kind == "op" and nt.text in ("=", "<>", "!=", "<", "<=", ">", ">="):
                raise _Refused("chained comparison")
            return _comparison(left, t.text, right)
        return left

    # [NOT] BETWEEN, [NOT] IN, [NOT] LIKE
    def between(self) -> _E:
        e = self.concat()
        while True:
            start = self.i
            negate = self.take("kw", "NOT")
            if self.take("kw", "BETWEEN"):
                low = self.concat()
                self.expect("kw", "AND")
                high = self.concat()
                e = _between(e, low, high, negate)
            elif self.take("kw", "IN"):
                self.expect("op", "(")
                items = [self.or_()]
                while self.take("op", ","):
                    items.append(self.or_())
                self.expect("op", ")")
                e = _in(e, items, negate)
            elif self.take("kw", "LIKE"):
                pattern = self.tok
                self.expect("str")
                e = _like(e, _string(pattern.text), negate)
            else:
                self.i = start
                return e

    def concat(self) -> _E:
        e = self.add()
        while self.take("op", "||"):
            right = self.add()
            e = _concat(e, right)
        return e

    def add(self) -> _E:
        e = self.mul()
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            op = self.tok.text
            self.i += 1
            e = _arith(e, op, self.mul())
        return e

    def mul(self) -> _E:
        e = self.unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/", "%"):
            op = self.tok.text
            self.i += 1
            e = _arith(e, op, self.unary())
        return e

    def unary(self) -> _E:
        if self.take("op", "-"):
            inner = self.unary()
            return _negate(inner)
        if self.take("op", "+"):
            inner = self.unary()
            if inner.type not in _NUMERIC:
                raise _Refused("unary + of a non-number")
            return inner
        return self.postfix()

    def postfix(self) -> _E:
        e = self.primary()
        while self.take("op", "::"):
            e = _cast(e, self.type_name())
        return e

    def type_name(self) -> str:
        t = self.tok
        if t.kind != "name" or t.text.upper() not in _CASTS:
            raise _Refused(f"type {t.text!r}")
        self.i += 1
        return _CASTS[t.text.upper()]

    def primary(self) -> _E:
        t = self.tok
        if t.kind == "num":
            self.i += 1
            return _number(t.text)
        if t.kind == "str":
            self.i += 1
            s = _string(t.text)
            return _E(lambda row: s, "VARCHAR")
        if t.kind == "op" and t.text == "(":
            self.i += 1
            e = self.or_()
            self.expect("op", ")")
            return e
        if t.kind == "kw":
            self.i += 1
            if t.text == "NULL":
                return _E(lambda row: None, "NULL")
            if t.text in ("TRUE", "FALSE"):
                value = t.text == "TRUE"
                return _E(lambda row: value, "BOOLEAN")
            if t.text == "CASE":
                return self.case()
            if t.text == "CAST":
                self.expect("op", "(")
                e = self.or_()
                self.expect("kw", "AS")
                kind = self.type_name()
                self.expect("op", ")")
                return _cast(e, kind)
            raise _Refused(f"keyword {t.text}")
        if t.kind == "name":
            self.i += 1
            if self.take("op", "("):
                args = [] if self.tok.kind == "op" and self.tok.text == ")" else [self.or_()]
                while self.take("op", ","):
                    args.append(self.or_())
                self.expect("op", ")")
                return _function(t.text.lower(), args)
            name = t.text.lower()
            if name not in _TYPES:
                raise _Refused(f"column {t.text}")
            return _E(lambda row: row[name], _TYPES[name])
        raise _Refused(f"unexpected {t.text!r}")

    def case(self) -> _E:
        subject = None
        if not (self.tok.kind == "kw" and self.tok.text == "WHEN"):
            subject = self.or_()
        whens: list[tuple[_E, _E]] = []
        while self.take("kw", "WHEN"):
            cond = self.or_()
            self.expect("kw", "THEN")
            whens.append((cond, self.or_()))
        if not whens:
            raise _Refused("CASE without WHEN")
        other = self.or_() if self.take("kw", "ELSE") else _E(lambda row: None, "NULL")
        self.expect("kw", "END")
        if subject is not None:
            whens = [(_comparison(subject, "=", cond), then) for cond, then in whens]
        kind = _unify([then.type for _, then in whens] + [other.type])
        conds = [_boolean(c).fn for c, _ in whens]
        thens = [_coerced(then, kind) for _, then in whens]
        last = _coerced(other, kind)
        pairs = list(zip(conds, thens, strict=True))

        def run(row: Row) -> Any:
            for cond, then in pairs:
                if cond(row) is True:
                    return then(row)
            return last(row)

        return _E(run, kind)


def _is_null(fn: Fn, negate: bool) -> Fn:
    def run(row: Row) -> bool:
        return (fn(row) is None) != negate

    return run


def _string(text: str) -> str:
    return text[1:-1].replace("''", "'")


def _number(text: str) -> _E:
    if "." in text:
        digits = len(text.replace(".", "").lstrip("0"))
        if digits > 18:
            raise _Refused("a decimal literal wider than 18 digits")
        d = Decimal(text)
        return _E(lambda row: d, "DECIMAL")
    n = int(text)
    if n >= 2**63:
        raise _Refused("an integer literal beyond BIGINT")
    kind = "INTEGER" if n < 2**31 else "BIGINT"
    return _E(lambda row: n, kind)


# -- operators ------------------------------------------------------------------------------
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda x, y: bool(x == y),
    "<>": lambda x, y: bool(x != y),
    "!=": lambda x, y: bool(x != y),
    "<": lambda x, y: bool(x < y),
    "<=": lambda x, y: bool(x <= y),
    ">": lambda x, y: bool(x > y),
    ">=": lambda x, y: bool(x >= y),
}


def _comparison(left: _E, op: str, right: _E) -> _E:
    kind = _unify([left.type, right.type])
    a, b = _coerced(left, kind), _coerced(right, kind)
    test = _COMPARE[op]

    def run(row: Row) -> bool | None:
        x = a(row)
        if x is None:
            return None
        y = b(row)
        return None if y is None else test(x, y)

    return _E(run, "BOOLEAN")


def _between(e: _E, low: _E, high: _E, negate: bool) -> _E:
    ge = _comparison(e, ">=", low)
    le = _comparison(e, "<=", high)
    both = _E(lambda row: _and3(ge.fn(row), le.fn(row)), "BOOLEAN")
    if not negate:
        return both
    return _E(lambda row: _not3(both.fn(row)), "BOOLEAN")


def _and3(x: bool | None, y: bool | None) -> bool | None:
    if x is False or y is False:
        return False
    return None if x is None or y is None else True


def _not3(x: bool | None) -> bool | None:
    return None if x is None else not x


def _in(e: _E, items: list[_E], negate: bool) -> _E:
    kind = _unify([e.type, *(i.type for i in items)])
    subject = _coerced(e, kind)
    fns = [_coerced(i, kind) for i in items]

    def run(row: Row) -> bool | None:
        x = subject(row)
        if x is None:
            return None
        unknown = False
        for f in fns:
            y = f(row)
            if y is None:
                unknown = True
            elif x == y:
                return not negate
        return None if unknown else negate

    return _E(run, "BOOLEAN")


def _like(e: _E, pattern: str, negate: bool) -> _E:
    if e.type not in ("VARCHAR", "NULL") or "\\" in pattern or not pattern.isascii():
        raise _Refused("LIKE of this kind")
    parts = ("." if c == "_" else ".*" if c == "%" else re.escape(c) for c in pattern)
    regex = re.compile("".join(parts), re.DOTALL)
    fn = e.fn

    def run(row: Row) -> bool | None:
        s = fn(row)
        if s is None:
            return None
        if not s.isascii():
            raise Unsure("LIKE over a non-ASCII string")
        return (regex.fullmatch(s) is None) == negate

    return _E(run, "BOOLEAN")


def _concat(left: _E, right: _E) -> _E:
    for side in (left, right):
        if side.type not in ("VARCHAR", "NULL"):
            raise _Refused("|| of a non-string")
    a, b = left.fn, right.fn

    def run(row: Row) -> str | None:
        x = a(row)
        if x is None:
            return None
        y = b(row)
        return None if y is None else x + y

    return _E(run, "VARCHAR")


def _arith(left: _E, op: str, right: _E) -> _E:
    kind = _unify([left.type, right.type])
    if kind == "NULL":
        kind = "INTEGER"
    if kind not in _NUMERIC:
        raise _Refused(f"{op} of {kind}")
    a, b = _coerced(left, kind), _coerced(right, kind)
    if op == "*" and kind == "DECIMAL":
        raise _Refused("decimal multiplication")  # (its width is DuckDB's own rule)
    if op == "/":
        if kind == "DECIMAL":
            raise _Refused("decimal division")
        result = "DOUBLE"
        a, b = _coerced(_E(a, kind), "DOUBLE"), _coerced(_E(b, kind), "DOUBLE")
    elif op == "%":
        if kind not in _INT_RANGE:
            raise _Refused(f"% of {kind}")
        result = kind
    else:
        result = kind
    calc = _OPS[op]

    def run(row: Row) -> Any:
        x = a(row)
        if x is None:
            return None
        y = b(row)
        if y is None:
            return None
        return calc(x, y, result)

    return _E(run, result)


def _finite(x: float) -> float:
    """A DOUBLE as IEEE arithmetic gives it, as DuckDB does; but not NaN (DuckDB orders it
    above every number and equal to itself, Python does not)."""
    if x != x:
        raise Unsure("NaN")
    return x


def _add(x: Any, y: Any, kind: str) -> Any:
    return _fit(x + y, kind)


def _sub(x: Any, y: Any, kind: str) -> Any:
    return _fit(x - y, kind)


def _mul(x: Any, y: Any, kind: str) -> Any:
    return _fit(x * y, kind)


def _div(x: float, y: float, kind: str) -> float:
    if y == 0:  # IEEE: infinity of the signs' product, NaN for 0/0
        if x == 0:
            raise Unsure("NaN")
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return _finite(x / y)


def _mod(x: int, y: int, kind: str) -> int:
    if y == 0:
        raise Unsure("modulo by zero (DuckDB's error)")
    r = abs(x) % abs(y)
    return _checked(-r if x < 0 else r, kind)


def _fit(v: Any, kind: str) -> Any:
    if kind in _INT_RANGE:
        return _checked(v, kind)
    if kind == "DOUBLE":
        return _finite(v)
    with localcontext() as ctx:  # exact below DuckDB's 38 digits
        ctx.prec = 60
        if abs(v) >= Decimal(10) ** 18:
            raise Unsure("a DECIMAL this wide")
        return +v


_OPS: dict[str, Callable[[Any, Any, str], Any]] = {
    "+": _add,
    "-": _sub,
    "*": _mul,
    "/": _div,
    "%": _mod,
}


def _negate(e: _E) -> _E:
    if e.type not in _NUMERIC:
        raise _Refused("minus of a non-number")
    fn, kind = e.fn, e.type

    def run(row: Row) -> Any:
        v = fn(row)
        return None if v is None else _fit(-v, kind)

    return _E(run, kind)


def _round_half_away(d: Decimal) -> int:
    return int(d.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _cast(e: _E, kind: str) -> _E:
    src = e.type
    fn = e.fn
    conv: Callable[[Any], Any]
    if src == kind or src == "NULL":
        return _E(fn, kind)
    if kind == "DOUBLE" and src in ("INTEGER", "BIGINT", "DECIMAL", "BOOLEAN"):

        def conv(v: Any) -> float:
            return _to_double(v, src)

    elif kind in _INT_RANGE and src in ("INTEGER", "BIGINT", "BOOLEAN"):

        def conv(v: Any) -> int:
            return _checked(int(v), kind)

    elif kind in _INT_RANGE and src == "DOUBLE":

        def conv(v: Any) -> int:  # to the nearest, ties to even (nearbyint)
            if v != v or v in (math.inf, -math.inf):
                raise Unsure("a DOUBLE beyond an integer")
            return _checked(round(v), kind)

    elif kind in _INT_RANGE and src == "DECIMAL":

        def conv(v: Any) -> int:
            return _checked(_round_half_away(v), kind)

    elif kind == "VARCHAR" and src in ("INTEGER", "BIGINT"):
        conv = str
    elif kind == "VARCHAR" and src == "BOOLEAN":

        def conv(v: Any) -> str:
            return "true" if v else "false"

    elif kind == "BOOLEAN" and src in ("INTEGER", "BIGINT"):
        conv = bool
    else:
        raise _Refused(f"CAST of {src} AS {kind}")

    def run(row: Row) -> Any:
        v = fn(row)
        return None if v is None else conv(v)

    return _E(run, kind)


# -- functions ------------------------------------------------------------------------------
def _function(name: str, args: list[_E]) -> _E:
    if name == "coalesce" and args:
        kind = _unify([a.type for a in args])
        fns = [_coerced(a, kind) for a in args]

        def coalesce(row: Row) -> Any:
            for f in fns:
                v = f(row)
                if v is not None:
                    return v
            return None

        return _E(coalesce, kind)
    if name in ("greatest", "least") and args:
        kind = _unify([a.type for a in args])
        if kind not in (*_NUMERIC, "VARCHAR"):
            raise _Refused(f"{name} of {kind}")
        fns = [_coerced(a, kind) for a in args]
        pick = max if name == "greatest" else min

        def extreme(row: Row) -> Any:
            found = [v for v in (f(row) for f in fns) if v is not None]
            return pick(found) if found else None

        return _E(extreme, kind)
    if name == "abs" and len(args) == 1 and args[0].type in _NUMERIC:
        fn, kind = args[0].fn, args[0].type

        def absolute(row: Row) -> Any:
            v = fn(row)
            return None if v is None else _fit(abs(v), kind)

        return _E(absolute, kind)
    if name in _STRING_FUNCTIONS and len(args) == 1 and args[0].type in ("VARCHAR", "NULL"):
        one, kind = _STRING_FUNCTIONS[name]
        fn = args[0].fn

        def unary(row: Row) -> Any:
            v = fn(row)
            if v is None:
                return None
            if name != "length" and not v.isascii():
                raise Unsure(f"{name} of a non-ASCII string")
            return one(v)

        return _E(unary, kind)
    if name in ("starts_with", "contains") and len(args) == 2:
        if any(a.type not in ("VARCHAR", "NULL") for a in args):
            raise _Refused(f"{name} of a non-string")
        a, b = args[0].fn, args[1].fn
        test = str.startswith if name == "starts_with" else str.__contains__

        def search(row: Row) -> bool | None:
            x = a(row)
            if x is None:
                return None
            y = b(row)
            return None if y is None else test(x, y)

        return _E(search, "BOOLEAN")
    raise _Refused(f"function {name}")


_STRING_FUNCTIONS: dict[str, tuple[Callable[[str], Any], str]] = {
    "lower": (str.lower, "VARCHAR"),
    "upper": (str.upper, "VARCHAR"),
    "length": (len, "BIGINT"),
}


def compile_expr(sql: str) -> Fn | None:
    """``sql`` (an expression over one call's columns) as a Python function of one row that
    gives what DuckDB gives, or None where this module does not know the expression (the
    caller then asks DuckDB). The function may raise ``Unsure`` for one row it cannot mirror
    (ask DuckDB for that row)."""
    try:
        return _Parser(sql).whole().fn
    except (_Refused, RecursionError):
        return None
