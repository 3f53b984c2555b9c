#!/usr/bin/env python3
"""Validates SARIF files against the OASIS SARIF 2.1.0 schema beside this script.

usage: validate.py FILE...   exit 0 when all are valid, 1 with the first error of each otherwise.
"""
import json
import os
import sys

import jsonschema

schema_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sarif-schema-2.1.0.json")
with open(schema_path, encoding="utf-8") as f:
    schema = json.load(f)
validator = jsonschema.Draft4Validator(schema)
status = 0
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:5]:
        print(f"{path}: {'/'.join(str(p) for p in e.path)}: {e.message}")
    status |= bool(errors)
    if not errors:
        print(f"{path}: valid SARIF 2.1.0")
sys.exit(status)
