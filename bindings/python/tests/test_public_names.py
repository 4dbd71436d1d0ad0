"""The package's public names, as they were before its split into private modules (issue 62), and
those modules' imports: each loads on its own, and none imports another that imports it back."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Set, Tuple

import pytest

import synaps_scope

PUBLIC = [
    "CannotWarn", "CannotWarnError", "CompletedProcess", "DEFAULT_KILL_TIMEOUT", "DEFAULT_PROBE_TIMEOUT",
    "Diagnosis", "EXEC_FAILED_STATUS", "Limits", "NotInScopeError", "NotOurScopeError", "OomdWarning",
    "OomdWatch", "Popen", "Pressure", "PressureLine", "ScopeEnding", "ScopeError", "ScopeHandle",
    "ScopeLauncher", "ScopeNotFoundError", "ScopePressure", "ScopeRequiredError", "ScopeStats",
    "ScopeTimeoutError", "ScopedProcess", "Unenforced", "Verdict", "Wrapped", "check_limits",
    "create_subprocess_exec", "diagnose", "doctor", "flush_warnings", "launcher_for_env",
    "launcher_for_env_async", "resolve_program", "run",
]  # fmt: skip
PACKAGE = Path(synaps_scope.__file__ or "").parent
PRIVATE = sorted(m.name for m in pkgutil.iter_modules([str(PACKAGE)]) if m.name.startswith("_") and m.name != "__main__")
SOURCES = [name for name in PRIVATE if (PACKAGE / f"{name}.py").exists()]


def test_all_is_the_recorded_public_surface() -> None:
    assert sorted(synaps_scope.__all__) == PUBLIC
    assert len(set(synaps_scope.__all__)) == len(PUBLIC)


def test_every_public_name_is_importable() -> None:
    for name in PUBLIC + ["StrOrBytesPath", "Env", "__version__"]:
        assert hasattr(synaps_scope, name), name
    exec(f"from synaps_scope import {', '.join(PUBLIC)}", {})


@pytest.mark.parametrize("module", PRIVATE)
def test_a_private_module_loads_first_in_a_fresh_interpreter(module: str) -> None:
    """Loaded with the package's ``__init__`` left out, so that the module's own imports come first
    and a cycle among them fails the import."""
    code = (
        "import importlib, sys, types\n"
        f"package = types.ModuleType('synaps_scope'); package.__path__ = [{str(PACKAGE)!r}]\n"
        "sys.modules['synaps_scope'] = package\n"
        f"importlib.import_module('synaps_scope.{module}')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _imports(module: str) -> Set[str]:
    """The package's modules that ``module`` imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse((PACKAGE / f"{module}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
    return found & set(PRIVATE)


def test_the_private_modules_import_no_cycle() -> None:
    graph: Dict[str, Set[str]] = {module: _imports(module) for module in SOURCES}
    done: Set[str] = set()

    def visit(module: str, path: Tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join(path + (module,))}"
        if module not in done:
            for imported in graph.get(module, set()):
                visit(imported, path + (module,))
            done.add(module)

    for module in SOURCES:
        visit(module, ())
