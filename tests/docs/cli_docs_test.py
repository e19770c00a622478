#!/usr/bin/env python3
"""Docs that stay true: the options of `hangscope ... --help` against README.md and docs/*.md.

Usage: tests/docs/cli_docs_test.py HANGSCOPE_BINARY SOURCE_DIR
Exit:  0 pass; 1 a mismatch (one FAIL line each: file, line, direction, command, option);
       2 bad usage, a --help that could not be run, or a reader that fails its own cases.

The commands come from the binary: `hangscope --help` lists the subcommands, `hangscope SUB
--help` each one's options and its own subcommands (`rules list`, `rules check`), so a new
command or option is covered without touching this file. Two directions are checked:

help -> docs  Every option `hangscope [SUB...] --help` prints is documented in docs/cli.md, in
              the section of that command: from its `## hangscope SUB` heading to the next
              heading of the same level (a nested command without a heading of its own: its
              parent's section). The options of `hangscope --help` itself, `-h`/`--help`
              included, are documented in the section whose heading says "Global options".
docs -> help  Every option the docs give to hangscope is one that command accepts, and every
              subcommand they name exists:
              - hangscope command lines in code blocks and inline code of README.md and
                docs/*.md: from the word `hangscope` (or a path ending in /hangscope) to the end
                of that command (`|`, `||`, `&&`, `;`, `&`, `)`, `#`); lines continued with a
                backslash, and synopsis lines continued by indentation (`  [--json] ...`), are
                joined. `hangscope` is the command when it is the command word (after sudo,
                env, VAR=value, `--`) or when the word after it is a subcommand (`srun ...
                hangscope collect`), so in `kubectl -n hangscope get pods`, `install
                build/src/hangscope /usr/bin/` or `torchrun --nproc-per-node 2 ... & hangscope
                diagnose` no other program's option is taken for hangscope's. Global options
                belong before the subcommand (CLI11 refuses them after it). Fenced blocks that
                name a language other than a shell's (```markdown, ```json) hold no commands.
              - inline code that starts with a subcommand: `collect --query-store`.
              - docs/cli.md only: inline code and table cells that start with an option
                (`--pid`, `-p`, `--tls-*`) are options of the section's command (a command with
                subcommands: of one of them), of the global options in the global section, of
                some command in sections of no command (the introduction, "Exit codes").
              The examples in each command's --help footer are read like the docs.
help <-> man  The man page (docs/hangscope.1) the same way: every option of a command's --help in
              its `.SS hangscope SUB` section (nested commands: their parent's), the global ones
              under `.SH GLOBAL OPTIONS`; every long option a section names is its command's,
              and after `hangscope SUB` on a line, SUB's.
The reader runs its own cases first (SELF_TEST below), so a change that makes it blind fails.
"""

import fnmatch
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

GLOBAL = "global"  # the section of the global options

# ---------------------------------------------------------------------------------------------
# The command tree, from --help.


@dataclass
class Command:
    path: tuple  # () for hangscope itself, ("rules", "list") for `hangscope rules list`
    flags: set = field(default_factory=set)  # "--pid", "-p", ...
    takes_value: set = field(default_factory=set)  # the flags that take a value
    subcommands: list = field(default_factory=list)
    help_text: str = ""

    @property
    def name(self):
        return " ".join(("hangscope",) + self.path)


def help_sections(text):
    """{"Options": [lines], "Subcommands": [lines], ...}: CLI11's blocks, up to a blank line."""
    sections, current = {}, None
    for line in text.splitlines():
        match = re.match(r"^([A-Z][A-Za-z ]*):\s*$", line)
        if match:
            current = sections.setdefault(match.group(1), [])
        elif not line.strip():
            current = None
        elif current is not None:
            current.append(line)
    return sections


def parse_help(path, text):
    command = Command(path=path, help_text=text)
    sections = help_sections(text)
    for line in sections.get("Options", []):
        if not re.match(r"^\s{1,4}-", line):
            continue  # a description on a line of its own
        # The name column ends at two spaces: "-p,--pid INT:PID REQUIRED   Process to capture";
        # a type after the names (TEXT, INT:PID, UINT:...) means the option takes a value.
        column = re.split(r"\s{2,}", line.strip())[0].split(" ")
        takes_value = len(column) > 1 and re.match(r"^[A-Z]+(:|$)", column[1]) is not None
        for name in column[0].split(","):
            name = re.sub(r"\{.*?\}", "", name).lstrip("!")  # --locals,--no-locals{false}
            if re.match(r"^--?[A-Za-z0-9]", name):
                command.flags.add(name)
                if takes_value:
                    command.takes_value.add(name)
    for line in sections.get("Subcommands", []):
        match = re.match(r"^\s{1,4}([a-z][a-z0-9_-]*)(\s|$)", line)
        if match:
            command.subcommands.append(match.group(1))
    return command


def run_help(binary, path):
    argv = [binary, *path, "--help"]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: cannot run {' '.join(argv)}: {e}")
        sys.exit(2)
    if result.returncode != 0 or "Options:" not in result.stdout:
        print(f"FAIL: {' '.join(argv)} exited {result.returncode} without its options:\n"
              f"{result.stdout}{result.stderr}")
        sys.exit(2)
    return result.stdout


def command_tree(binary):
    """{path: Command} for hangscope and every (nested) subcommand its --help lists."""
    tree, todo = {}, [()]
    while todo:
        path = todo.pop(0)
        tree[path] = parse_help(path, run_help(binary, path))
        todo.extend(path + (sub,) for sub in tree[path].subcommands)
    return tree


# ---------------------------------------------------------------------------------------------
# Markdown: headings, code block lines, inline code spans.

SHELL_FENCES = {"", "sh", "bash", "shell", "console", "zsh", "shell-session"}


@dataclass
class Fragment:
    """Text read as code: a line of a code block, or an inline code span."""
    line: int  # of its first character
    text: str
    indent: int = 0  # code block lines: leading spaces (synopsis continuation lines)


def parse_markdown(text):
    """([(line, level, heading text)], [code block Fragment], [inline code Fragment])."""
    headings, blocks, paragraphs = [], [], []  # paragraphs: (first line, [lines])
    fence = None  # the open fence ("```", "````", "~~~") and whether it holds shell
    previous_blank, in_indented, paragraph = True, False, None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.expandtabs(4)
        indent = len(line) - len(line.lstrip())
        if fence is not None:
            closing = re.match(r"^\s*(`{3,}|~{3,})\s*$", line)
            marker = closing.group(1) if closing else ""
            if marker[:1] == fence[0][0] and len(marker) >= len(fence[0]):
                fence = None
            elif fence[1]:
                blocks.append(Fragment(number, line, indent))
            continue
        opening = re.match(r"^\s*(`{3,}|~{3,})\s*([^`\s]*)", line)
        if opening:
            fence = (opening.group(1), opening.group(2).lower() in SHELL_FENCES)
            previous_blank, in_indented, paragraph = False, False, None
            continue
        if not line.strip():
            previous_blank, paragraph = True, None
            continue
        if line.startswith("    ") and (previous_blank or in_indented):
            blocks.append(Fragment(number, line[4:], indent - 4))
            previous_blank, in_indented, paragraph = False, True, None
            continue
        previous_blank, in_indented = False, False
        heading = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if heading:
            headings.append((number, len(heading.group(1)), heading.group(2)))
            paragraph = None
            continue
        if paragraph is None:
            paragraph = (number, [])
            paragraphs.append(paragraph)
        paragraph[1].append(line)
    spans = []
    for first, lines in paragraphs:  # a span may go on over a line break
        joined = "\n".join(lines)
        for match in re.finditer(r"(`+)(.+?)\1", joined, re.S):
            line = first + joined.count("\n", 0, match.start())
            spans.append(Fragment(line, match.group(2).replace("\n", " ").strip()))
    return headings, blocks, spans


def join_continuations(blocks):
    """Code block lines grouped into commands: backslash continuations, and synopsis lines that
    go on, indented deeper, with `[--option` or `--option`."""
    groups, current, indent = [], [], None
    for fragment in blocks:
        text = fragment.text.rstrip()
        synopsis = re.match(r"^\s*(\[-|-[-A-Za-z])", text)
        continues = current and (current[-1].text.endswith("\\") or (
            indent is not None and fragment.indent > indent and synopsis))
        if not continues:
            if current:
                groups.append(current)
            current = []
            indent = fragment.indent if any(is_hangscope(w) for w in WORD.findall(text)) else None
        current.append(Fragment(fragment.line, text))
    if current:
        groups.append(current)
    for group in groups:
        for fragment in group:
            fragment.text = fragment.text.removesuffix("\\")
    return groups


# ---------------------------------------------------------------------------------------------
# Shell words, and the hangscope commands in them.

WORD = re.compile(r"""(?:[^\s'"]+|'[^']*'|"[^"]*"|['"])+""")
FLAG = re.compile(r"^(--[A-Za-z0-9][A-Za-z0-9_*-]*|-[A-Za-z]+)(=.*)?$")
SEPARATORS = {"|", "||", "&&", ";", ")", "&"}
PREFIX_COMMANDS = {"sudo", "env", "exec", "time", "nohup", "command", "nice", "$", "#"}
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.\.\.|…)?$")  # hangscope COMMAND --help


@dataclass
class Word:
    text: str
    line: int


def shell_commands(fragments):
    """The words of fragments (one command's lines), cut into shell commands: lists of Words."""
    commands, current = [], []
    for fragment in fragments:
        depth = 0  # inside [ ] of a synopsis `|` separates alternatives, not commands
        for text in WORD.findall(fragment.text):
            if text.startswith("#"):
                if current:
                    break  # a comment
                current.append(Word("#", fragment.line))  # a prompt, or a commented-out line
                break
            if depth == 0 and text in SEPARATORS:
                commands.append(current)
                current = []
                continue
            if text.startswith("$("):
                commands.append(current)
                current = []
                text = text[2:]
            ends = depth == 0 and text.endswith((";", ")")) and not text.startswith("(")
            text = text.rstrip(";)") if ends else text
            depth = max(depth + text.count("[") - text.count("]"), 0)
            if text:
                current.append(Word(text, fragment.line))
            if ends:
                commands.append(current)
                current = []
    commands.append(current)
    return [c for c in commands if c]


def clean(word):
    """A word without the synopsis' brackets and the prose around it: "[--json]" -> "--json"."""
    return word.strip("[](){}<>\"'`,.:")


def is_hangscope(word):
    """`hangscope`, `build/src/hangscope`, `["/usr/bin/hangscope"` (not `hangscope:`, a message)."""
    text = word.strip("[]()\"'`,")
    return not text.startswith("-") and (text == "hangscope" or text.endswith("/hangscope"))


def flag_names(word):
    """The options in a word: "--json" -> ["--json"], "-vv" -> ["-v", "-v"], "--x=1" -> ["--x"]."""
    match = FLAG.match(clean(word))
    if not match:
        return []
    name = match.group(1)
    return [name] if name.startswith("--") else ["-" + c for c in name[1:]]  # -vv: grouped


@dataclass
class Use:
    """An option the docs give to hangscope."""
    source: str
    line: int
    paths: list  # the command(s) it is given to: one, or alternatives (`rules list|check`)
    flag: str
    section: object = None  # docs/cli.md: the command path of its section, GLOBAL, or None
    bare: bool = False  # docs/cli.md: an option on its own: one of paths' is enough

    @property
    def glob(self):
        return "*" in self.flag  # `--tls-*`: stands for the options it matches


@dataclass
class Problem:
    source: str
    line: int
    token: str  # the option or subcommand at fault
    message: str

    def __str__(self):
        return f"{self.source}:{self.line}: {self.message}"


def describe(paths):
    return " | ".join(" ".join(("hangscope",) + p) for p in paths)


class Reader:
    """Reads the docs: collects the options they give to hangscope, and unknown subcommands."""

    def __init__(self, tree):
        self.tree = tree
        self.uses = []
        self.problems = []
        self.sections = []  # docs/cli.md: (first line, last line, path | GLOBAL | None)

    def hangscope_command(self, source, command, section=None):
        """The hangscope command in one shell command, if any (a wrapper may run it: srun)."""
        for i, word in enumerate(command):
            if not is_hangscope(word.text):
                continue
            before = [w.text for w in command[:i]]
            first = all(w in PREFIX_COMMANDS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w) or
                        (w.startswith("-") and before[:1] == ["sudo"]) for w in before)
            first = first or (before and before[-1] == "--")
            named = self.first_argument(command[i + 1:]) in self.tree[()].subcommands
            if first or named:  # not `kubectl -n hangscope get`, `install .../hangscope /usr/bin/`
                self.arguments(source, command[i + 1:], [()], section)
                return

    def first_argument(self, words):
        """The first word that is neither a global option nor its value: the subcommand."""
        skip = False
        for word in words:
            flags = flag_names(word.text)
            if not skip and not flags:
                return clean(word.text)
            skip = bool(flags) and "=" not in word.text and flags[-1] in self.tree[()].takes_value
        return None

    def arguments(self, source, words, paths, section):
        """The words after `hangscope` or a subcommand: options, then maybe a subcommand."""
        i = 0
        while i < len(words):
            word = words[i]
            text = clean(word.text)
            if text == "--":
                return  # what follows is not hangscope's
            flags = flag_names(word.text)
            if flags:
                for flag in flags:
                    self.uses.append(Use(source, word.line, paths, flag, section))
                value = all(f in self.tree[p].takes_value for p in paths for f in flags)
                i += 2 if value and "=" not in word.text and not word.text.endswith("]") else 1
                continue
            parent = next((p for p in paths if self.tree[p].subcommands), None)
            if parent is not None and text and not word.text.startswith("["):
                if PLACEHOLDER.match(text) or text in ("...", "…"):
                    return  # hangscope COMMAND --help
                names = text.split("|")  # rules list|check
                subcommands = self.tree[parent].subcommands
                unknown = next((n for n in names if n not in subcommands), None)
                if unknown is not None:
                    name = self.tree[parent].name
                    self.problems.append(Problem(
                        source, word.line, unknown,
                        f"docs -> help: `{name} {unknown}`: `{name} --help` has no subcommand "
                        f"'{unknown}' (it has: {', '.join(subcommands)})"))
                    return
                paths = [parent + (n,) for n in names]
            i += 1

    def read(self, source, text, cli=False):
        """One markdown file; cli: docs/cli.md, whose sections and bare options count."""
        headings, blocks, spans = parse_markdown(text)
        if cli:
            self.read_sections(source, headings)
        for group in join_continuations(blocks):
            for command in shell_commands(group):
                self.hangscope_command(source, command, self.section_at(command[0].line, cli))
        for span in spans:
            section = self.section_at(span.line, cli)
            commands = shell_commands([span])
            if not commands:
                continue
            head = commands[0]
            if head[0].text in self.tree[()].subcommands and len(head) > 1:
                self.arguments(source, head[1:], [(head[0].text,)], section)  # `collect --once`
            elif cli and re.match(r"^(--[A-Za-z0-9]|-[A-Za-z]$)", clean(head[0].text)):
                if section == GLOBAL:
                    paths = [()]
                elif section:
                    paths = [p for p in self.tree if p[:len(section)] == section]
                else:
                    paths = [p for p in self.tree if p]  # the introduction, exit codes
                for word in head:
                    for flag in flag_names(word.text):
                        self.uses.append(Use(source, span.line, paths, flag, section, bare=True))
                for command in commands[1:]:
                    self.hangscope_command(source, command, section)
            else:
                for command in commands:
                    self.hangscope_command(source, command, section)

    def read_sections(self, source, headings):
        """docs/cli.md's sections: a heading's command (`## hangscope rules`), GLOBAL, or the
        section of the heading it is under (`### JSON keys` under `## hangscope dump`)."""
        stack, starts = [], []  # stack: (level, section)
        for line, level, text in headings:
            while stack and stack[-1][0] >= level:
                stack.pop()
            words = re.sub(r"[`*]", "", text).split()
            section = None
            if words and words[0] == "hangscope":
                section = ()
                for w in words[1:]:
                    if not re.match(r"^[a-z][a-z0-9_-]*$", w):
                        break
                    if w not in self.tree[section].subcommands:
                        if self.tree[section].subcommands:
                            name = self.tree[section].name
                            self.problems.append(Problem(
                                source, line, w, f"docs -> help: heading '{text}': `{name} --help` "
                                f"has no subcommand '{w}'"))
                        break
                    section += (w,)
            elif re.search(r"\bglobal\b", text, re.I):
                section = GLOBAL
            elif stack:
                section = stack[-1][1]
            stack.append((level, section))
            starts.append((line, section))
        for i, (line, section) in enumerate(starts):
            last = starts[i + 1][0] - 1 if i + 1 < len(starts) else 10**9
            self.sections.append((line, last, section))

    def section_at(self, line, cli):
        if not cli:
            return None
        return next((s for first, last, s in self.sections if first <= line <= last), None)


# ---------------------------------------------------------------------------------------------
# The two directions.


def accepted(tree, use):
    def has(path):
        names = tree[path].flags
        if use.glob:
            return any(fnmatch.fnmatchcase(n, use.flag) for n in names)
        return use.flag in names
    return any(map(has, use.paths)) if use.bare else all(map(has, use.paths))


def docs_to_help(tree, reader):
    problems = []
    top = tree[()]
    for use in reader.uses:
        if accepted(tree, use):
            continue
        if use.bare:
            where = ("the global options section" if use.section == GLOBAL else
                     f"section '{describe([use.section])}'" if use.section else
                     "a section of no command")
            listed = describe(use.paths[:3]) + (" | ..." if len(use.paths) > 3 else "")
            message = (f"docs -> help: {where} documents {use.flag}, which `{listed} --help` "
                       f"does not list")
        else:
            where = "before the subcommand" if use.paths == [()] else "after the subcommand"
            hint = (" (a global option: it goes before the subcommand)"
                    if use.paths != [()] and use.flag in top.flags else "")
            message = (f"docs -> help: `{describe(use.paths)}` is given {use.flag} {where}, which "
                       f"its --help does not list{hint}")
        problems.append(Problem(use.source, use.line, use.flag, message))
    return problems


def help_to_docs(tree, reader, cli_name):
    """Every option of every --help in its command's section of docs/cli.md."""
    documented = {}  # command path or GLOBAL -> options documented in its section
    for use in reader.uses:
        if use.source != cli_name or use.glob or use.section is None:
            continue
        if use.section == GLOBAL:
            if use.paths == [()]:
                documented.setdefault(GLOBAL, set()).add(use.flag)
            continue
        for path in use.paths:  # a command's option, in its section or its parent's
            if path and path[:len(use.section)] == use.section:
                documented.setdefault(path, set()).add(use.flag)
    starts = {}
    for first, _, section in reader.sections:
        starts.setdefault(section, first)
    problems = []
    if GLOBAL not in starts:
        problems.append(Problem(cli_name, 1, "Global options", "help -> docs: no 'Global options' "
                                "section for the options of `hangscope --help`"))
    global_docs = documented.get(GLOBAL, set())
    for path, command in tree.items():
        if not path:
            for flag in sorted(command.flags - global_docs) if GLOBAL in starts else []:
                problems.append(Problem(cli_name, starts[GLOBAL], flag,
                                        f"help -> docs: `hangscope --help` lists {flag}; the "
                                        f"global options section does not document it"))
            continue
        home = next((path[:n] for n in range(len(path), 0, -1) if path[:n] in starts), None)
        if home is None:
            problems.append(Problem(cli_name, 1, command.name,
                                    f"help -> docs: `{command.name}` has no section (a heading "
                                    f"'## {command.name}')"))
            continue
        for flag in sorted(command.flags - documented.get(path, set())):
            if flag in tree[()].flags and flag in global_docs:
                continue  # -h, --help: every command has them, documented with the global ones
            problems.append(Problem(cli_name, starts[home], flag,
                                    f"help -> docs: `{command.name} --help` lists {flag}; section "
                                    f"'{describe([home])}' does not document it"))
    return problems


def all_problems(tree, reader, cli_name=None):
    """Unknown subcommands, docs -> help, and with docs/cli.md read, help -> docs."""
    problems = reader.problems + docs_to_help(tree, reader)
    return problems + help_to_docs(tree, reader, cli_name) if cli_name else problems


def check(tree, root):
    reader = Reader(tree)
    cli_md = root / "docs" / "cli.md"
    for file in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
        reader.read(str(file.relative_to(root)), file.read_text(encoding="utf-8"), file == cli_md)
    for command in tree.values():
        for number, line in enumerate(help_sections(command.help_text).get("Examples", []), 1):
            for words in shell_commands([Fragment(number, line)]):
                reader.hangscope_command(f"`{command.name} --help` example", words)
    problems = all_problems(tree, reader, str(cli_md.relative_to(root)))
    man = root / "docs" / "hangscope.1"
    text = man.read_bytes().decode("utf-8", errors="replace")
    return reader, problems + man_problems(tree, str(man.relative_to(root)), text)



# ---------------------------------------------------------------------------------------------
# The man page (docs/hangscope.1): each command's options in its `.SS hangscope SUB` section
# (nested commands in their parent's), the global ones under `.SH GLOBAL OPTIONS`; an option
# named anywhere else (synopsis, examples, environment) must be one that some command has.

MAN_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[A-Za-z])(?![\w-])")


def man_text(line):
    """A roff line as it reads: `\\-` as '-', font changes and named characters dropped."""
    line = line.replace("\\-", "-")
    line = re.sub(r"\\f[BIRP]|\\f\(..|\\\(..|\\&|\\e", "", line)
    return re.sub(r"^\.(B|I|BR|BI|IR|RB|RI|IB)\s", "", line)


def man_sections(text):
    """[(line, section, text)]: section is GLOBAL, a command path, or None (any other)."""
    out, section = [], None
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.startswith(".SH "):
            section = GLOBAL if raw[4:].strip().strip('"') == "GLOBAL OPTIONS" else None
            continue
        match = re.match(r'^\.SS "?hangscope ([a-z][a-z0-9 -]*)"?\s*$', raw)
        if match:
            section = tuple(match.group(1).split())
        elif not raw.startswith(".\\\""):  # not a roff comment
            out.append((number, section, man_text(raw)))
    return out


def man_uses(tree, section, text):
    """[(flag, paths, documents)]: the options a man line names and whose they must be. After
    `hangscope SUB` on the line they are SUB's (a use, not its documentation); on other lines of
    a command's or the global section they document it; lines of other sections (synopsis,
    examples) are checked only when they are hangscope commands."""
    command = re.search(r"(?<![\w/-])hangscope ([a-z][a-z0-9-]*)", text)
    if command and (command.group(1),) in tree:
        after = text[command.end():]
        paths = [p for p in tree if p[:1] == (command.group(1),)]
        before = MAN_FLAG.findall(text[:command.start()])
        return [(f, paths, False) for f in MAN_FLAG.findall(after)] + \
            ([(f, None, True) for f in before] if section else [])
    if section is None:
        return []
    return [(f, None, True) for f in MAN_FLAG.findall(text)]


def man_problems(tree, name, text):
    problems, documented, starts = [], {}, {}
    for number, section, line in man_sections(text):
        starts.setdefault(section, number)
        for flag, paths, documents in man_uses(tree, section, line):
            if documents:
                documented.setdefault(section, set()).add(flag)
                paths = [()] if section == GLOBAL else [p for p in tree if p[:len(section)] == section]
            if not flag.startswith("--"):
                continue  # short options are checked from --help only: prose has dashes
            if not any(flag in tree[p].flags for p in paths):
                where = ("GLOBAL OPTIONS" if section == GLOBAL else
                         f"section 'hangscope {' '.join(section)}'" if section else "the page")
                problems.append(Problem(name, number, flag, f"man -> help: {where} gives {flag} "
                                        f"to `{describe(paths[:1])}`, whose --help does not list "
                                        f"it"))
    for path, command in tree.items():
        home = GLOBAL if not path else path[:1]
        if home not in starts:
            problems.append(Problem(name, 1, command.name, f"help -> man: no section for "
                                    f"`{command.name}`"))
            continue
        flags = command.flags if not path else command.flags - tree[()].flags
        for flag in sorted(flags - documented.get(home, set())):
            problems.append(Problem(name, starts[home], flag, f"help -> man: `{command.name} "
                                    f"--help` lists {flag}; its man page section does not"))
    return problems


# ---------------------------------------------------------------------------------------------
# The reader's own cases: markdown, and the options or subcommands it must report (options of
# other programs on the same lines must not be). They use options every hangscope has had.

SELF_TEST = [
    ("    torchrun --nproc-per-node 2 train.py & sudo hangscope -v diagnose --pid 1 --frobnicate\n",
     ["--frobnicate"]),
    ("    srun --overlap --jobid 7 hangscope collect --once -o n.json --bogus\n", ["--bogus"]),
    ("    srun -N 2 hangscope --log-level debug collect --bad\n", ["--bad"]),
    ("    kubectl -n hangscope get pods -o wide\n"
     "    install -m 0755 build/src/hangscope /usr/bin/hangscope\n"
     "    systemctl restart hangscope-agent; apt-get install -y ./hangscope_0.1.0_amd64.deb\n", []),
    ("    hangscope diagnose --agents a,b \\\n"
     "        --token-file t --tls-bogus x | jq -r .verdicts --arg y\n",
     ["--tls-bogus"]),
    ("    hangscope dump --pid PID [--json] [--native-only | --python-only]\n"
     "                   [--stop-mode each|all] [--no-such]\n", ["--no-such"]),
    ("Run `hangscope rules list|check --json` or `hangscope rules lint x`.\n", ["lint"]),
    ("Inline `collect --query-store --nope` and `hangscope frobnicate --x`, not `report` alone.\n",
     ["--nope", "frobnicate"]),
    ("    hangscope diagnose -v\n    cmake --build build && build/src/hangscope --log-level debug "
     "report b --json; ctest -L unit --output-on-failure\n", ["-v"]),
    ("```markdown\nhangscope 0.1.0 (git abc)\n```\n\n"
     "```sh\nhangscope dump --pid 1 --nah  # a --comment\n```\n",
     ["--nah"]),
    ("    python -m torch.distributed.run --nnodes 2 x.py; "
     "docker run --rm img hangscope dump -p 1 -x\n",
     ["-x"]),
    ("    hangscope: error: --pid 'x': not a process id\n"
     "    echo $(hangscope diagnose --json --zz)\n",
     ["--zz"]),
]

SELF_TEST_CLI = """# Command line

For agents, `--ticket`.

## hangscope dump

| `--pid`, `-p` | the process |

`--bogus-dump`

### JSON keys

`--locals`

## hangscope nosuch

## Global options

| `--log-level` | `--json` |
"""


SELF_TEST_MAN = r""".SH GLOBAL OPTIONS
.BR \-h ", " \-\-help
.SS hangscope dump
.BR \-p ", " \-\-pid " \fIPID\fR"
.B \-\-bogus\-dump
.SH EXAMPLES
tools/deploy/slurm/hangscope\-slurm.sh JOBID \-\-out /shared/hang
"""


def self_test(tree):
    failures = []
    for markdown, expected in SELF_TEST:
        reader = Reader(tree)
        reader.read("case", markdown)
        got = sorted(p.token for p in all_problems(tree, reader))
        if got != sorted(expected):
            failures.append(f"reports {got}, expected {sorted(expected)}, in:\n{markdown}")
    reader = Reader(tree)
    reader.read("cli", SELF_TEST_CLI, cli=True)
    got = sorted(p.token for p in all_problems(tree, reader))
    if got != ["--bogus-dump", "--json", "nosuch"]:
        failures.append(f"cli.md case: docs -> help reports {got}")
    missing = {(p.message.split("`")[1], p.token) for p in help_to_docs(tree, reader, "cli")}
    dump = "hangscope dump --help"
    if (dump, "--json") not in missing or {(dump, "--pid"), (dump, "--locals")} & missing:
        failures.append(f"cli.md case: help -> docs reports {sorted(missing)}")
    man = {(p.message.split(":")[0], p.token) for p in man_problems(tree, "man", SELF_TEST_MAN)}
    if ("man -> help", "--bogus-dump") not in man or ("help -> man", "--json") not in man or \
            {("help -> man", "--pid"), ("man -> help", "--out")} & man:
        failures.append(f"man page case: reports {sorted(man)}")
    return failures


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    binary, root = sys.argv[1], Path(sys.argv[2]).resolve()
    tree = command_tree(binary)
    failures = self_test(tree)
    for failure in failures:
        print(f"FAIL: the reader itself: {failure}")
    if failures:
        return 2
    reader, problems = check(tree, root)
    for problem in problems:
        print(f"FAIL: {problem}")
    commands = ", ".join(" ".join(p) for p in tree if p)
    print(f"{'FAIL' if problems else 'ok'}: {len(problems)} mismatch(es) between docs and --help; "
          f"{len(tree)} commands (hangscope, {commands}), "
          f"{sum(len(c.flags) for c in tree.values())} options in --help, {len(reader.uses)} "
          f"option uses read in README.md, docs/*.md and the --help examples")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
