"""The two printers of the loop-nest IR (tilec/lower/triton_printer.py, nest_printer.py) and the expression
nodes they read (tilec/lower/code.py): parentheses follow the nodes, so a printed expression parses back to
the tree it came from; the interpreter's composite forms are parenthesized as what they print; renaming
reaches every name a node reads, the nest's too; and Triton is spelled in one module only."""

from __future__ import annotations

import ast
import io
import random
import tokenize
from pathlib import Path

from tilec.lower import code as c
from tilec.lower.nest import Assign, Note, names_read_stmt, rename_stmt
from tilec.lower.nest_printer import NestPrinter, line, show
from tilec.lower.triton_printer import Form, render

INTERPRETER = Form("interpreter")
_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
            ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


def _tree(node):
    """A parsed expression as nested tuples: (op, a, b), ("neg", x), a name, a number."""
    if isinstance(node, ast.BinOp):
        return _AST_OPS[type(node.op)], _tree(node.left), _tree(node.right)
    if isinstance(node, ast.Compare):
        assert len(node.ops) == 1, "a comparison chain: an operand of a comparison lost its parentheses"
        return _AST_OPS[type(node.ops[0])], _tree(node.left), _tree(node.comparators[0])
    if isinstance(node, ast.UnaryOp):
        return ("neg" if isinstance(node.op, ast.USub) else "inv"), _tree(node.operand)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant):
        return node.value
    raise AssertionError(f"unexpected node {ast.dump(node)}")


def _expect(e: c.Ex):
    """The tree `e` means, in the same nested tuples (a Sum or All is its chain, folded left)."""
    if isinstance(e, c.BinOp):
        return e.op, _expect(e.a), _expect(e.b)
    if isinstance(e, (c.Sum, c.All)):
        op, out = ("+" if isinstance(e, c.Sum) else "&"), _expect(e.terms[0])
        for t in e.terms[1:]:
            out = (op, out, _expect(t))
        return out
    if isinstance(e, c.UnaryOp):
        return ("neg" if e.op == "-" else "inv"), _expect(e.x)
    if isinstance(e, c.Name):
        return e.id
    if isinstance(e, c.Num) and e.negative:
        return "neg", -e.value
    return e.value


def _random_expr(rng: random.Random, depth: int) -> c.Ex:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([c.Name(rng.choice("abcd")), c.Num(rng.randint(-3, 9))])
    kind = rng.random()
    if kind < 0.7:
        return c.BinOp(rng.choice(list(c.PREC)), _random_expr(rng, depth - 1), _random_expr(rng, depth - 1))
    if kind < 0.8:
        return c.UnaryOp(rng.choice("-~"), _random_expr(rng, depth - 1))
    terms = tuple(_random_expr(rng, depth - 1) for _ in range(rng.randint(2, 4)))
    return c.Sum(terms) if kind < 0.9 else c.All(terms)


def test_a_printed_expression_parses_back_to_its_tree():
    """Every operator at every depth, both printers: the parentheses written are exactly those Python needs to
    read the tree back, evaluation order included (a - (b - c), (a < b) == c: no comparison chain)."""
    rng = random.Random(24)
    for _ in range(3000):
        e = _random_expr(rng, 4)
        for text in (render(e), show(e)):
            assert _tree(ast.parse(text, mode="eval").body) == _expect(e), text


def test_parentheses_only_where_the_binding_needs_them():
    a, b, x = c.Name("a"), c.Name("b"), c.Name("x")
    assert render(c.BinOp("*", c.BinOp("+", a, b), x)) == "(a + b) * x"
    assert render(c.BinOp("+", c.BinOp("*", a, b), x)) == "a * b + x"
    assert render(c.BinOp("*", c.BinOp("//", a, b), x)) == "(a // b) * x"  # for the reader
    assert render(c.BinOp("==", c.BinOp("<", a, b), c.Num(0))) == "(a < b) == 0"
    assert render(c.All((c.BinOp(">=", x, c.Num(0)), c.BinOp("<", x, a)))) == "(x >= 0) & (x < a)"
    assert render(c.To(c.BinOp("+", a, b), "float32")) == "(a + b).to(tl.float32)"
    assert render(c.Expand(c.To(x, "bfloat16"), (True, False))) == "x.to(tl.bfloat16)[:, None]"
    assert render(c.UnaryOp("-", c.Num(-3))) == "-(-3)"
    assert render(c.BinOp(">=", x, c.Num(-1.0))) == "x >= -1.0"
    assert render(c.call("maximum", a, c.Num(float("-inf")), nan=True)) == \
        'tl.maximum(a, float("-inf"), propagate_nan=tl.PropagateNan.ALL)'


def test_the_interpreters_tanh_and_fmod_are_parenthesized_as_what_they_print():
    """In the interpreter form tanh is a product and fmod a `%`, not calls: converted or multiplied, they are
    parenthesized there (else `.to` would convert the last factor only), and not on the GPU."""
    t = c.To(c.Tanh(c.Name("x"), "e"), "bfloat16")
    assert render(t) == "libdevice.tanh(x).to(tl.bfloat16)"
    assert render(t, INTERPRETER) == "(tl.where(x >= 0, 1.0, -1.0) * (1.0 - e) / (1.0 + e)).to(tl.bfloat16)"
    m = c.BinOp("*", c.Name("y"), c.Fmod(c.Name("a"), c.Name("b")))
    assert render(m) == "y * libdevice.fmod(a, b)"
    assert render(m, INTERPRETER) == "y * (a % b)"


def test_renaming_reaches_every_name_a_statement_reads_and_its_nest_line():
    """A name deep in a call, a loop counter, a tanh's exp and the note's names: all renamed together, so the
    nest line names what the Triton line computes."""
    value = c.call("exp", c.BinOp("-", c.Name("acc_m"), c.Tanh(c.LoopIndex("ko"), "e")))
    st = Assign("alpha_m", value, Note(("exp(", c.Name("acc_m"), " - ", c.Name("m_new"), ")")))
    assert names_read_stmt(st) == {"acc_m", "ko", "e"}
    new = rename_stmt(st, {"acc_m": "acc_m_1", "ko": "ko_1", "e": "e_1", "m_new": "m_new_1", "alpha_m": "alpha_m_1"})
    assert names_read_stmt(new) == {"acc_m_1", "ko_1", "e_1"}
    assert render(new.value) == "tl.exp(acc_m_1 - libdevice.tanh(ko_1))"
    assert line(new, NestPrinter()) == "alpha_m_1 = exp(acc_m_1 - m_new_1)"


def test_the_nest_shows_knobs_as_their_values_and_specialized_sizes_by_name():
    extent = c.call("cdiv", c.Num(4096, size="N"), c.Name("BN"))
    assert show(extent, {"BN": 64}) == "cdiv(N, 64)"
    assert render(extent) == "tl.cdiv(4096, BN)"


def test_triton_is_spelled_in_the_triton_printer_only():
    """No string in tilec/lower's code (docstrings and comments aside) spells Triton, but the printer's."""
    root = Path(__file__).resolve().parent.parent / "tilec" / "lower"
    spelled = []
    for path in sorted(root.glob("*.py")):
        if path.name == "triton_printer.py":
            continue
        tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
        texts = (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING))  # 3.12 splits f-strings
        for n, tok in enumerate(tokens):
            if tok.type not in texts or n == 0 or (tok.type == tokenize.STRING and tokens[n - 1].type in (
                    tokenize.INDENT, tokenize.NEWLINE, tokenize.NL, tokenize.DEDENT)):
                continue  # a docstring (a string statement) is prose
            if any(word in tok.string for word in ("tl.", "libdevice", "[:, None]", "[None, :]")):
                spelled.append(f"{path.name}:{tok.start[0]}: {tok.string[:60]}")
    assert spelled == []
