"""Test-side helpers shared by the test modules in tests/'s subfolders; not
tests themselves.

pytest puts tests/ on ``sys.path`` (the folder of the root conftest.py, in
its default import mode), so every test module imports them as
``helpers.<module>``, whichever subfolder it sits in and whether the whole
suite or one file runs.
"""
