"""Edits to source files, and the unified diff they make (pure, but for applying).

A :class:`Draft` collects edits to one file in the original file's
coordinates -- replace a statement, add a parameter, put statements at
the start of a function, insert a fixture above a test, add an import --
and :meth:`Draft.result` applies them bottom-up, so no edit moves
another. A :class:`Patch` is the changed files, printed as a unified diff
``git apply`` and ``patch -p1`` accept (paths relative to the rootdir,
``a/`` and ``b/`` prefixes), and written to a directory only where each
file still holds exactly the text the patch was made from.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import hashlib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from hermetic_hunt.errors import HuntError
from hermetic_hunt.fix.source import FunctionNode, Module
from hermetic_hunt.project import OutsideProject, confine


class PatchConflict(HuntError):
    """A file changed since the patch was made from it."""


@dataclass(frozen=True)
class FileChange:
    path: str
    before: str
    after: str


@dataclass(frozen=True)
class Patch:
    """Whole-file changes (``path`` relative to the rootdir, posix)."""

    files: tuple[FileChange, ...]

    def diff(self) -> str:
        out: list[str] = []
        for change in self.files:
            out.extend(
                difflib.unified_diff(
                    change.before.splitlines(keepends=True),
                    change.after.splitlines(keepends=True),
                    f"a/{change.path}",
                    f"b/{change.path}",
                )
            )
        return "".join(line if line.endswith("\n") else line + "\n" for line in out)

    @property
    def sha(self) -> str:
        """Identifies the patch (the stored verification of this exact diff)."""
        return hashlib.sha256(self.diff().encode()).hexdigest()

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.files]

    def apply_to(self, root: str | os.PathLike[str]) -> list[Path]:
        """Write every file under ``root``; :class:`PatchConflict` (nothing written)
        when one no longer holds the text the patch was made from, or when its
        path -- resolved, links followed -- leads outside ``root``.

        Each file is written through a temporary file beside it and a rename,
        keeping its line endings (CRLF stays CRLF), its encoding (a coding
        cookie, a BOM) and its mode. A link inside ``root`` is written through
        to the file it points to (when that file is inside ``root`` too).
        """
        base = Path(root).resolve()
        targets = []
        for change in self.files:
            try:
                target = confine(base, change.path, "the patched file")
            except OutsideProject as exc:
                raise PatchConflict(str(exc)) from None
            try:
                data = target.read_bytes()
                encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
                current = data.decode(encoding)
            except (OSError, SyntaxError, LookupError, UnicodeDecodeError) as exc:
                raise PatchConflict(f"cannot read {target}: {exc}") from None
            newline = "\r\n" if "\r\n" in current else "\r" if "\r" in current else "\n"
            before, after = change.before, change.after
            if encoding == "utf-8-sig":  # the BOM is the encoding's, not the text's
                before, after = before.removeprefix("\ufeff"), after.removeprefix("\ufeff")
            if current.replace("\r\n", "\n").replace("\r", "\n") != before:  # as text mode reads it
                raise PatchConflict(
                    f"{change.path} changed since the patch was made: run 'hermetic-hunt fix' again"
                )
            text = after.replace("\n", newline) if newline != "\n" else after
            try:
                encoded = text.encode(encoding)
            except UnicodeEncodeError as exc:
                raise PatchConflict(f"cannot write {target} as {encoding}: {exc}") from None
            targets.append((target, encoded))
        for target, encoded in targets:
            _replace(target, encoded)
        return [t for t, _ in targets]


def _replace(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temporary file and a rename (mode kept)."""
    mode = stat.S_IMODE(target.stat().st_mode)
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _char_col(line: str, byte_col: int) -> int:
    """An ``ast`` column (UTF-8 bytes) as a string index."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


@dataclass
class _Op:
    line: int  # 0-based
    col: int  # characters
    end_line: int
    end_col: int
    text: str
    order: int


@dataclass
class Draft:
    """Edits to one module (see the module docstring)."""

    module: Module
    ops: list[_Op] = field(default_factory=list)
    _imported: set[str] = field(default_factory=set)
    _params: dict[int, list[str]] = field(default_factory=dict)
    #: Statements put first in each function (by its line), fixtures defined,
    #: fixture names chosen: what the suggestion added, so it adds each once.
    prepended: set[tuple[int, str]] = field(default_factory=set)
    fixtures: set[str] = field(default_factory=set)
    names: dict[str, str] = field(default_factory=dict)
    _above: list[str] = field(default_factory=list)
    _above_line: int = 0

    def _add(self, line: int, col: int, end_line: int, end_col: int, text: str) -> None:
        self.ops.append(_Op(line, col, end_line, end_col, text, len(self.ops)))

    def replace(self, line: int, col: int, end_line: int, end_col: int, text: str) -> None:
        """Replace a span given in ``ast`` coordinates (1-based lines, byte columns)."""
        first, last = self.module.lines[line - 1], self.module.lines[end_line - 1]
        self._add(line - 1, _char_col(first, col), end_line - 1, _char_col(last, end_col), text)

    def rewrite(self, line: int, col: int, end_line: int, end_col: int, text: str) -> None:
        """Replace a statement (``ast`` coordinates) with ``text`` and drop the comment
        that ends its last line: it spoke of the code replaced (``# never put back``
        after the ``os.environ[...] = ...`` that ``monkeypatch.setenv`` puts back).
        A line that goes on after the statement (``a = 1; b = 2  # c``) keeps it."""
        last = self.module.lines[end_line - 1]
        rest = last[_char_col(last, end_col) :]
        if rest.lstrip().startswith("#"):
            end_col = len(last.rstrip("\r\n").encode("utf-8"))
        self.replace(line, col, end_line, end_col, text)

    def insert_lines(self, before: int, lines: list[str]) -> None:
        """Insert whole lines before line ``before`` (1-based; past the end: append)."""
        text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        index = before - 1
        if index >= len(self.module.lines):
            if self.module.lines and not self.module.lines[-1].endswith("\n"):
                text = "\n" + text
            index = len(self.module.lines)
        self._add(index, 0, index, 0, text)

    # -- functions ---------------------------------------------------------------

    def add_param(self, function: FunctionNode, name: str) -> bool:
        """Add parameter ``name`` (a fixture) to ``function``; False where it cannot be."""
        args = function.args
        existing = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        pending = self._params.setdefault(function.lineno, [])
        if name in existing or name in pending:
            return True
        if args.kwarg is not None or args.defaults or any(d is not None for d in args.kw_defaults):
            return False
        spot = self._param_spot(function)
        if spot is None:
            return False
        line, col, empty, comma = spot
        if empty:
            text = f", {name}" if pending else name
        else:
            text = f" {name}," if comma else f", {name}"
        self._add(line, col, line, col, text)
        pending.append(name)
        return True

    def _param_spot(self, function: FunctionNode) -> tuple[int, int, bool, bool] | None:
        """Where a new parameter goes: (line, col, no parameters yet, ends with a comma)."""
        start = function.lineno - 1
        end = (function.body[0].lineno - 1) if function.body else start + 1
        source = "".join(self.module.lines[start : max(end, start + 1)])
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        depth = 0
        last: tuple[int, int, str] | None = None  # last significant token inside the parens
        opened = None
        noise = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
        try:
            for token in tokens:
                if token.type == tokenize.NAME and token.string == function.name:
                    break
            for token in tokens:
                if token.type == tokenize.OP and token.string == "(":
                    depth += 1
                    if depth == 1:
                        opened = (token.end[0], token.end[1])
                        continue
                elif token.type == tokenize.OP and token.string == ")":
                    depth -= 1
                    if depth == 0:
                        if last is None and opened is not None:
                            return start + opened[0] - 1, opened[1], True, False
                        if last is None:
                            return None
                        return start + last[0] - 1, last[1], False, last[2] == ","
                if depth >= 1 and token.type not in noise:
                    last = (token.end[0], token.end[1], token.string)
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass
        return None

    def prepend(self, function: FunctionNode, statements: list[str]) -> bool:
        """Put ``statements`` first in ``function``'s body (after its docstring)."""
        body = function.body
        if is_docstring(body[0]) and len(body) == 1:  # below the docstring, at its indent
            line, before = body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1
        else:  # above the first statement (after the docstring)
            line = before = body[1 if is_docstring(body[0]) else 0].lineno
            if line == function.lineno:
                return False  # def f(): pass -- a one-line function
        indent = indent_of(self.module.lines[line - 1])
        self.insert_lines(before, [indent + s for s in statements])
        return True

    # -- module level ------------------------------------------------------------

    def insert_above(self, stmt: ast.stmt, block: list[str]) -> None:
        """Insert a block of top-level code above ``stmt`` (its decorators and comments)."""
        line = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        while line > 1 and self.module.lines[line - 2].lstrip().startswith("#"):
            line -= 1
        lines = [*block, "", ""]
        if line > 1 and self.module.lines[line - 2].strip():
            lines = ["", "", *lines]
        self.insert_lines(line, lines)

    def ensure_import(self, statement: str, binds: str) -> str:
        """Add ``statement`` (binding ``binds``) unless the module binds that name."""
        module = self.module
        if binds in module.imports or binds in module.globals or binds in self._imported:
            return binds
        self._imported.add(binds)
        body = module.tree.body
        first_local = last_import = None
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if first_local is None and self._local(stmt):
                    first_local = stmt
                last_import = stmt
            elif not is_docstring(stmt):
                break
        if first_local is not None and statement.startswith("import "):
            # The standard library and pytest go above the project's own imports.
            self._above.append(statement)
            self._above_line = first_local.lineno
            return binds
        # below the last import, else below the module's docstring, else first
        anchor = last_import or (body[0] if body and is_docstring(body[0]) else None)
        after = (anchor.end_lineno or anchor.lineno) + 1 if anchor is not None else 1
        self.insert_lines(after, [statement])
        return binds

    def _local(self, stmt: ast.stmt) -> bool:
        """Is ``stmt`` an import of the project's own code (``from shop import x``)?"""
        names = [a.asname or a.name.split(".")[0] for a in getattr(stmt, "names", [])]
        refs = [self.module.imports.get(n) for n in names]
        return bool(refs) and all(r is not None and r.path is not None for r in refs)

    # -- result --------------------------------------------------------------------

    def result(self) -> str:
        ops = list(self.ops)
        if self._above:
            index = self._above_line - 1
            text = "".join(f"{s}\n" for s in sorted(self._above)) + "\n"
            ops.append(_Op(index, 0, index, 0, text, -1))
        lines = list(self.module.lines)
        size = len(lines)
        for op in sorted(ops, key=lambda o: (o.line, o.col, o.order), reverse=True):
            if op.line >= size:
                lines.insert(size, op.text)  # later ops first: the first one ends up first
                continue
            head = lines[op.line][: op.col]
            tail = lines[op.end_line][op.end_col :] if op.end_line < len(lines) else ""
            lines[op.line : op.end_line + 1] = [head + op.text + tail]
        return "".join(lines)


def is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def build(drafts: list[Draft]) -> Patch | None:
    """The patch of every draft that changes its file (None: nothing changes)."""
    files = []
    for draft in drafts:
        after = draft.result()
        if after != draft.module.text:
            files.append(FileChange(draft.module.rel, draft.module.text, after))
    return Patch(tuple(files)) if files else None
