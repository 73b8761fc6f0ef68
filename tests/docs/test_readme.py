"""The README's examples run, and CI runs the README's test command."""

import re

import pytest

from helpers.paths import ROOT

README = (ROOT / "README.md").read_text()


def code_blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_opens_with_the_two_commands():
    first = code_blocks("bash")[0].strip().splitlines()
    assert first == [
        "pip install . && cepam demo",
        'pip install torch==2.13.0 ".[test]" && python -m pytest',
    ]
    assert README.index("```bash") < README.index("\n\n", README.index("# cepam") + 7) + 3


def test_ci_runs_the_readme_test_command():
    test_command = code_blocks("bash")[0].strip().splitlines()[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci


@pytest.mark.parametrize("index", range(len(code_blocks("python"))))
def test_python_examples_run(index, capsys):
    source = code_blocks("python")[index]
    # An example that uses an extra skips without it (as pip install . has none).
    for marker, extra in (("import torch", "torch"), ("cepam.accounting", "scipy"),
                          ("cepam.flower", "flwr"), ("matplotlib", "matplotlib")):
        if marker in source:
            pytest.importorskip(extra)
    exec(compile(source, f"README.md[python {index}]", "exec"), {"__name__": "__readme__"})
