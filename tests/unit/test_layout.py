"""The package's layout, read from its source (fast, nothing imported but the config).

The design page's map (``book/reference/design.md``) says which layer each module is in and that
imports only go down. These tests keep that true: they fail on an import cycle, on an import of a
higher layer, on a module importing its own package's face (its ``__init__``), on an import of the
package's own modules inside a function, on a module of any length that answers several questions
(one module per question: :func:`definition_groups`, with a chapter's typed findings about one
object counted as one question, :func:`question_groups`), and on an environment variable read
anywhere but :mod:`context_neurons.config` or missing from the configuration page's table.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from context_neurons import config

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "context_neurons"
CONFIGURATION_PAGE = PACKAGE.parents[1] / "book" / "reference" / "configuration.md"

#: Layer of each top-level module or subpackage: a module imports only from layers <= its own
#: (the same layer only without a cycle, which the cycle test checks).
LAYERS: dict[str, int] = {
    "config": 0, "checks": 0, "files": 0, "hooks": 0, "caching": 0, "printing": 0, "progress": 0,
    "text": 1,
    "models": 2,
    "decomposition": 3,
    "taxonomy": 4, "taxonomy_findings": 4, "stability": 4,
    "circuit": 5, "position_schemes": 5,
    "discovery": 6, "domain_shift": 6,
    "evaluation": 7, "method": 7,
    "casestudies": 8, "own_domain": 8, "assumptions": 8, "band_coverage": 8, "lookups": 8, "activations": 8, "training": 8,
    "respelling": 9, "sweeps": 9, "recovery": 9, "verdict": 9,
    "plotting": 10,
    "gallery": 11, "interactive": 11,
    "reproduce": 12, "book": 12, "commands": 13, "__main__": 13, "__init__": 13,
}
#: Layer of each module inside ``verdict`` (issue 51): a module imports only from layers <= its
#: own. 0: the protocols' files and their typed constants (the registry, each file read once, the
#: typed entries of a model without a result, protocol v3's table of registered models, how a
#: result is written, the statistics the rules name); 1: the computation (data, head sets, truth,
#: scores and baselines, the comparison, the controls, the label-free arm, the paper's claim);
#: 2: the typed results, and the stored ones with every registered model's entry; 3: a protocol's
#: whole run (v1 and v2's ``evaluate``, ``v3``, ``gpt2``); 4: the reports and the entry points.
VERDICT_LAYERS: dict[str, int] = {
    "registry": 0, "protocol": 0, "protocols": 0, "gpt2_protocol": 0, "entries": 0,
    "formatting": 0, "statistics": 0, "v3_models": 0, "options": 0,
    "documents": 1, "draws": 1, "data": 1, "v3_data": 1, "gpt2_data": 1, "context_set": 1,
    "truth": 1, "baselines": 1, "bag_of_tokens": 1, "comparison": 1, "label_free": 1,
    "planted": 1, "paper_claim": 1,
    "results": 2, "scores": 2, "v3_result": 2, "gpt2_result": 2, "v3_stored": 2,
    "evaluate": 3, "v3": 3, "gpt2": 3,
    "v3_report": 4, "development": 4, "__init__": 4,
}
#: ``(module, imported)`` inside ``verdict`` that break :data:`VERDICT_LAYERS`, each with why.
#: None today: ``read_json_fields`` moved from ``results`` to ``formatting``, ``LabelFreePool``
#: from ``v3_result`` to ``label_free``, ``comparability`` from ``v3_report`` to
#: ``v3_models`` and ``model_entries`` to ``v3_stored``, so that no lower module imports a
#: higher one.
VERDICT_EXCEPTIONS: dict[tuple[str, str], str] = {}
#: From this many unrelated groups of definitions (:func:`question_groups`), a module holds several
#: questions; every module is checked, whatever its length (the token windows of ``text.windows``,
#: three groups for the calibration text, the domains and the look-ups, are one question: which
#: windows a chapter reads).
MAX_GROUPS = 4


def modules() -> dict[str, Path]:
    """Dotted name (without ``context_neurons.``) -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name or "__init__"] = path
    return found


def package_imports(path: Path) -> list[tuple[str, ast.AST, bool]]:
    """``(imported module, node, inside a function)`` for each import of the package's modules."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
            "context_neurons"
        ):
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("context_neurons")]
        if not names:
            continue
        inside, parent = False, parents.get(node)
        while parent is not None:
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = True
            parent = parents.get(parent)
        known = modules()
        for name in names:
            short = name.removeprefix("context_neurons").lstrip(".")
            if short in known:
                out.append((short, node, inside))
    return out


def top(name: str) -> str:
    return name.split(".")[0]


def test_every_module_has_a_layer():
    missing = sorted({top(name) for name in modules()} - set(LAYERS))
    assert not missing, f"add these modules to LAYERS (and to the map in book/reference/design.md): {missing}"


def test_imports_go_down_the_layers():
    wrong = []
    for name, path in modules().items():
        for imported, node, _ in package_imports(path):
            if LAYERS[top(imported)] > LAYERS[top(name)]:
                wrong.append(f"{name} (layer {LAYERS[top(name)]}) imports {imported} "
                             f"(layer {LAYERS[top(imported)]}), line {node.lineno}")
    assert not wrong, "\n".join(wrong)


def inner_imports(package: str) -> dict[str, list[tuple[str, int]]]:
    """For each module of a subpackage (its name inside it, ``__init__`` for its face), the
    modules of the same subpackage it imports, with the line."""
    def inner(name: str) -> str:
        return name.split(".", 1)[1] if "." in name else "__init__"

    return {inner(name): [(inner(imported), node.lineno)
                          for imported, node, _ in package_imports(path)
                          if top(imported) == package and imported != name]
            for name, path in modules().items() if top(name) == package}


def layer_violations(package: str, layers: dict[str, int],
                     imports: dict[str, list[tuple[str, int]]],
                     exceptions: dict[tuple[str, str], str]) -> list[str]:
    """Each import of a higher layer (:data:`VERDICT_LAYERS`) not among ``exceptions``."""
    return [f"{package}.{name} (layer {layers[name]}) imports {package}.{imported} "
            f"(layer {layers[imported]}), line {line}"
            for name, found in imports.items() for imported, line in found
            if layers[imported] > layers[name] and (name, imported) not in exceptions]


def test_every_verdict_module_has_a_layer():
    inside = set(inner_imports("verdict"))
    assert inside == set(VERDICT_LAYERS), (
        f"add to VERDICT_LAYERS (and to book/reference/design.md): "
        f"{sorted(inside - set(VERDICT_LAYERS))}; remove: {sorted(set(VERDICT_LAYERS) - inside)}")


def test_verdict_imports_go_down_its_layers():
    """Inside ``verdict``: protocol files and constants, then the computation, then the results,
    then a protocol's whole run, then the reports; a lower module never imports a higher one."""
    wrong = layer_violations("verdict", VERDICT_LAYERS, inner_imports("verdict"),
                             VERDICT_EXCEPTIONS)
    assert not wrong, "\n".join(wrong)
    imports = inner_imports("verdict")
    stale = [pair for pair in VERDICT_EXCEPTIONS if pair[1] not in {i for i, _ in imports[pair[0]]}]
    assert not stale, f"these exceptions no longer import what they name: {stale}"


def test_the_design_page_lists_the_verdict_layers():
    page = (PACKAGE.parents[1] / "book" / "reference" / "design.md").read_text()
    table = page[page.index("Inside `verdict`"):]
    rows = re.findall(r"^\| (\d) \| ([^|]+) \|", table, re.M)
    listed = {name: int(layer) for layer, names in rows for name in re.findall(r"`(\w+)`", names)}
    assert listed == VERDICT_LAYERS


def test_the_verdict_layer_check_finds_a_lower_module_importing_a_higher_one():
    imports = {"protocol": [("v3_report", 7)], "v3_report": [("protocol", 3)],
               "comparison": [("statistics", 5), ("v3_stored", 9)]}
    assert layer_violations("verdict", VERDICT_LAYERS, imports, {}) == [
        "verdict.protocol (layer 0) imports verdict.v3_report (layer 4), line 7",
        "verdict.comparison (layer 1) imports verdict.v3_stored (layer 2), line 9"]
    excepted = {("protocol", "v3_report"): "a reason"}
    assert len(layer_violations("verdict", VERDICT_LAYERS, imports, excepted)) == 1


def test_no_import_cycle():
    graph = {name: set() for name in modules()}
    for name, path in modules().items():
        for imported, _, _ in package_imports(path):
            if imported != name:
                graph[name].add(imported)
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        if state.get(node) == 1:
            cycle = trail[trail.index(node):] + [node]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if state.get(node) == 2:
            return
        state[node] = 1
        for nxt in sorted(graph[node]):
            visit(nxt, trail + [node])
        state[node] = 2

    for name in sorted(graph):
        visit(name, [])


def test_no_module_imports_its_own_package_face():
    """A module reaches a sibling by its full name (``import context_neurons.verdict.statistics
    as st``), never through its package's ``__init__`` (``from context_neurons.verdict import
    statistics``), which imports the module back: a cycle in the import graph (issue 51)."""
    faces = [f"{name} imports {imported}, line {node.lineno}"
             for name, path in modules().items()
             for imported, node, _ in package_imports(path)
             if imported != name and name.startswith(imported + ".")]
    assert not faces, "import siblings by their full module name:\n" + "\n".join(faces)


def test_no_package_import_inside_a_function():
    inside = [
        f"{name}: line {node.lineno}"
        for name, path in modules().items()
        for _, node, nested in package_imports(path)
        if nested and name != "__main__"  # the command line defers what each command needs
    ]
    assert not inside, "import the package's modules at the top of the module:\n" + "\n".join(inside)


def test_optional_imports_in_functions_are_commented():
    uncommented = []
    for name, path in modules().items():
        lines = path.read_text().splitlines()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)) and "context_neurons" not in (
                    getattr(inner, "module", "") or ""
                ):
                    window = " ".join(lines[inner.lineno - 2 : inner.end_lineno])
                    if "#" not in window:
                        uncommented.append(f"{name}: line {inner.lineno}")
    assert not uncommented, "say why an import is deferred (a comment on it):\n" + "\n".join(
        uncommented
    )


def definition_groups(source: str) -> list[list[str]]:
    """The groups of a module's top-level functions and classes that work together: two
    definitions are in one group when one names the other, shared helpers set aside (a definition
    that names none of the others and is named by two or more). Groups of one are left out.

    A module that answers one question is one group, or a main group and a few small ones; one
    that holds several studies falls apart into several groups of their own.
    """
    tree = ast.parse(source)
    defs = {node.name: node for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    names = {name: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & set(defs) - {name}
             for name, node in defs.items()}
    shared = {name for name in defs
              if not names[name] and sum(name in used for used in names.values()) >= 2}
    linked = {name: set() for name in defs if name not in shared}
    for name in linked:
        for other in names[name] - shared:
            linked[name].add(other)
            linked[other].add(name)
    groups, seen = [], set()
    for name in linked:
        if name in seen:
            continue
        group, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in group:
                group.add(current)
                todo += linked[current]
        seen |= group
        groups.append(sorted(group))
    return [g for g in groups if len(g) >= 2]


def test_definition_groups_split_a_module_of_two_studies():
    source = "\n".join([
        "def shared(x): return x", "def helper(x): return x",
        "def study_a(x): return helper(shared(x))", "def plot_a(x): return study_a(x)",
        "def study_b(x): return shared(x) + helper(x)", "def report_b(x): return study_b(x)",
    ])
    assert definition_groups(source) == [["plot_a", "study_a"], ["report_b", "study_b"]]
    assert definition_groups("def f(): return g()\ndef g(): return 1") == [["f", "g"]]


def finding_subject(source: str, group: list[str]) -> str | None:
    """What a *finding* reads, or ``None`` when ``group`` is not one.

    A finding is a group of exactly one class and one function annotated to return it: a typed
    result with the sentences a chapter prints (a ``findings`` method) and the function that
    builds it (``rule_effects(taxonomy) -> RuleEffects``). Its subject is the annotation of the
    function's first parameter (``HeadTaxonomy``).
    """
    defs = {node.name: node for node in ast.parse(source).body if getattr(node, "name", None)}
    classes = [n for n in group if isinstance(defs[n], ast.ClassDef)]
    functions = [defs[n] for n in group if isinstance(defs[n], ast.FunctionDef)]
    if len(group) != 2 or len(classes) != 1 or len(functions) != 1:
        return None
    (function,) = functions
    says = {n.name for n in defs[classes[0]].body if isinstance(n, ast.FunctionDef)}
    if "findings" not in says:
        return None
    returns = function.returns
    arguments = function.args.posonlyargs + function.args.args
    if not (isinstance(returns, ast.Name) and returns.id == classes[0] and arguments
            and arguments[0].annotation is not None):
        return None
    return ast.unparse(arguments[0].annotation)


#: What a reporter's annotation says it returns: words for a reader.
WORDS = ("str", "list[str]")
#: Annotations that name a kind of container, not a subject: a function of one turns any text or
#: mapping into words (``printing.nested_lines``), it does not report on an object.
NOT_SUBJECTS = ("Any", "Iterable", "Mapping", "Path", "Sequence")


def reporter_subject(node: ast.AST) -> str | None:
    """What a *reporter* reports on, or ``None`` when ``node`` is not one.

    A reporter is a public function annotated to return words (:data:`WORDS`): a sentence or the
    lines a chapter or a command prints (``truth_lines(entry: V3Evaluation) -> list[str]``). Its
    subject is the annotation of its first parameter (``V3Evaluation``): a type of the package's
    (a capitalised name), not a builtin (``str``) nor a container (:data:`NOT_SUBJECTS`).
    """
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
        return None
    arguments = node.args.posonlyargs + node.args.args
    if node.returns is None or ast.unparse(node.returns) not in WORDS or not arguments \
            or arguments[0].annotation is None:
        return None
    subject = ast.unparse(arguments[0].annotation)
    return subject if subject[:1].isupper() and subject not in NOT_SUBJECTS else None


def question_groups(source: str) -> list[list[str]]:
    """:func:`definition_groups`, with the findings about one subject (:func:`finding_subject`)
    joined into one group, and the reporters (:func:`reporter_subject`) counted by subject.

    A finding names nothing else by design (each of a chapter's sections states its own), so
    findings never link; but the findings a module reads off one object answer one question, what
    that object shows (chapter 2's findings, each read off one ``HeadTaxonomy``). Findings about
    different subjects stay apart, and a study (anything larger than a class and its builder) is
    never joined.

    A reporter that names no other definition and is named by none would be a group of one, left
    out: a module of unrelated reporters would count as no question at all (issue 51). So a
    reporter alone is a group of its own, and the groups holding reporters about one subject are
    joined (what one object says is one question); reporters about different subjects are as
    many questions.
    """
    tree = ast.parse(source)
    defs = {node.name: node for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    named = {n.id for name, node in defs.items() for n in ast.walk(node)
             if isinstance(n, ast.Name) and n.id != name}
    groups, findings = [], {}
    for group in definition_groups(source):
        subject = finding_subject(source, group)
        if subject is None:
            groups.append(group)
        else:
            findings.setdefault(subject, []).extend(group)
    grouped = {name for group in groups for name in group}
    groups += [[name] for name, node in defs.items()
               if name not in grouped and name not in named and reporter_subject(node)]
    joined: list[tuple[set[str], set[str]]] = []  # (names, the subjects of their reporters)
    for group in groups:
        names = set(group)
        subjects = {reporter_subject(defs[name]) for name in group} - {None}
        for other in [j for j in joined if j[1] & subjects]:
            joined.remove(other)
            names, subjects = names | other[0], subjects | other[1]
        joined.append((names, subjects))
    return [sorted(names) for names, _ in joined] + [sorted(group) for group in findings.values()]


def test_question_groups_join_findings_about_one_subject():
    finding = ("class {0}:\n    def findings(self): return []\n"
               "def {1}(x: {2}, y=None) -> {0}: return {0}()")
    one_subject = "\n".join([finding.format("A", "a", "Taxonomy"),
                             finding.format("B", "b", "Taxonomy")])
    assert len(definition_groups(one_subject)) == 2
    assert question_groups(one_subject) == [["A", "B", "a", "b"]]
    two_subjects = "\n".join([finding.format("A", "a", "Taxonomy"),
                              finding.format("B", "b", "Circuit")])
    assert question_groups(two_subjects) == [["A", "a"], ["B", "b"]]
    not_findings = "\n".join([  # a's return is not A; B says nothing (no findings method)
        "class A:\n    def findings(self): return []", "def a(x: Taxonomy): return A()",
        "class B: pass", "def b(x: Taxonomy) -> B: return B()"])
    assert question_groups(not_findings) == [["A", "a"], ["B", "b"]]


def test_question_groups_count_unrelated_reporters_as_several_questions():
    """Issue 51: a module of reporters that never name each other is not 'no question': the
    reporters about one subject are one question, those about another a second."""
    reporter = "def {0}(x: {1}) -> list[str]: return []"
    unrelated = "\n".join([reporter.format("verdict_lines", "Evaluation"),
                           reporter.format("replication_table", "Entries"),
                           reporter.format("band_lines", "CertifiedBand"),
                           reporter.format("truth_lines", "Evaluation")])
    assert definition_groups(unrelated) == []  # each alone: left out before
    assert sorted(question_groups(unrelated)) == [["band_lines"], ["replication_table"],
                                                  ["truth_lines", "verdict_lines"]]
    # a group holding a reporter takes the reporters alone about the same subject
    study = "\n".join(["def _line(x): return ''",
                       "def sentences(r: Evaluation) -> list[str]: return [_line(r)]",
                       reporter.format("readings", "Evaluation"),
                       "def helper(): return 1", "def other() -> str: return str(helper())"])
    assert sorted(question_groups(study)) == [["_line", "readings", "sentences"],
                                              ["helper", "other"]]
    many = "\n".join(reporter.format(f"r{i}", f"Subject{i}") for i in range(MAX_GROUPS))
    assert len(question_groups(many)) >= MAX_GROUPS  # would fail the module check below
    # not reporters: private, unannotated, about a builtin or a container, or not returning words
    assert question_groups("def _a(x: A) -> str: return ''\ndef b(x) -> str: return ''\n"
                           "def c(x: C) -> dict: return {}\ndef d(x: str) -> str: return x\n"
                           "def e(x: Mapping) -> list[str]: return []") == []


def test_every_module_answers_one_question():
    several = {}
    for name, path in modules().items():
        groups = question_groups(path.read_text())
        if len(groups) >= MAX_GROUPS:
            several[name] = groups
    assert not several, (
        "these modules answer several questions (groups of definitions that never name each "
        f"other): one module per question, a package if they belong together: {several}")


def test_every_module_says_what_it_answers():
    silent = [name for name, path in modules().items()
              if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()]
    assert not silent, f"give these modules a docstring saying what they answer: {silent}"


def _reads_environment(tree: ast.AST) -> list[int]:
    """Lines that read ``os.environ`` or ``os.getenv`` other than by a config variable's name."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def by_config_name(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and ast.unparse(node).startswith("config.")

    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and ast.unparse(node) in ("os.environ", "os.getenv")):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and by_config_name(parent.slice):
            continue  # os.environ[config.X.name] = ... (setting a variable for a child process)
        call = parents.get(parent)
        if (isinstance(parent, ast.Attribute) and parent.attr == "setdefault"
                and isinstance(call, ast.Call) and by_config_name(call.args[0])):
            continue
        lines.append(node.lineno)
    return lines


def test_environment_is_read_only_in_config():
    readers = []
    for name, path in modules().items():
        if name == "config":
            continue
        tree = ast.parse(path.read_text())
        if _reads_environment(tree):
            readers.append(f"{name}: lines {_reads_environment(tree)}")
        named = {  # a variable's name as a string of its own: defined outside config
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"CONTEXT_NEURONS_[A-Z_0-9]+", node.value)
        }
        if named:
            readers.append(f"{name} names {sorted(named)}")
    assert not readers, "read the environment through context_neurons.config:\n" + "\n".join(
        readers
    )


def test_every_variable_is_in_the_configuration_table():
    page = CONFIGURATION_PAGE.read_text()
    table = set(re.findall(r"^\| `(CONTEXT_NEURONS_[A-Z_0-9]+)` \|", page, re.M))
    assert table == {v.name for v in config.VARIABLES}, (
        table ^ {v.name for v in config.VARIABLES}
    )


def test_no_reference_outside_the_repository():
    cited = [
        name for name, path in modules().items() if "METHOD.md" in path.read_text()
    ]
    assert not cited, f"cite the book's notation page, not METHOD.md: {cited}"
