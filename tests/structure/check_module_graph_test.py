#!/usr/bin/env python3
"""check_module_graph.py finds each kind of violation in a small tree built to have them, and
names nothing that is allowed there (tests/structure/fixture)."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_module_graph.py")
FIXTURE = os.path.join(HERE, "fixture")


def run(root, links, readme=None):
    args = [sys.executable, CHECKER, "--root", root, "--links", links]
    if readme:
        args += ["--readme", readme]
    done = subprocess.run(args, capture_output=True, text=True)
    return done.returncode, done.stdout.splitlines()


class CheckModuleGraph(unittest.TestCase):
    def test_reports_every_violation_and_nothing_allowed(self):
        rc, lines = run(FIXTURE, os.path.join(FIXTURE, "links.txt"))
        self.assertEqual(rc, 1)
        self.assertEqual(lines, [
            "links: app links OpenSSL::SSL (OpenSSL), which its row does not allow",
            "links: cutline_base links cutline_net, which its row does not allow",
            "links: cutline_extra has no row in the README's module graph",
            "base/src/result.cc:2: cutline_base includes cutline/net/loop.h of cutline_net, "
            "which its row does not allow",
            "base/src/result.cc:3: cutline_base includes <openssl/ssl.h> of OpenSSL, "
            "which its row does not allow",
            "net/src/loop.cc:2: includes cutline/nowhere/x.h, which no module of the table "
            "provides",
            "module graph: 6 violation(s)",
        ])

    def test_a_tree_within_its_table_passes(self):
        with tempfile.TemporaryDirectory() as tmp:
            links = os.path.join(tmp, "links.txt")
            with open(links, "w") as f:
                f.write("cutline_base: \ncutline_net: cutline_base;PkgConfig::LIBEVENT\n"
                        "app: cutline_net\n")
            readme = os.path.join(tmp, "README.md")
            with open(os.path.join(FIXTURE, "README.md")) as f:
                table = f.read()
            # The same table, with base allowed what its sources use.
            table = table.replace("| `cutline_base` | `base/` | — | — |",
                                  "| `cutline_base` | `base/` | — | OpenSSL |")
            with open(readme, "w") as f:
                f.write(table)
            root = os.path.join(tmp, "tree")
            subprocess.run(["cp", "-r", FIXTURE, root], check=True)
            with open(os.path.join(root, "base/src/result.cc"), "w") as f:
                f.write('#include "cutline/base/result.h"\n#include <openssl/ssl.h>\n')
            with open(os.path.join(root, "net/src/loop.cc"), "w") as f:
                f.write('#include "cutline/net/loop.h"\n')
            rc, lines = run(root, links, readme)
            self.assertEqual(rc, 0, lines)
            self.assertEqual(lines, ["module graph: 3 targets, links and includes as the "
                                     "README's table says"])

    def test_only_a_row_of_an_optional_toolkit_may_be_absent_from_a_build(self):
        with tempfile.TemporaryDirectory() as tmp:
            links = os.path.join(tmp, "links.txt")
            with open(links, "w") as f:
                f.write("cutline_base: \ncutline_net: cutline_base;PkgConfig::LIBEVENT\n"
                        "app: cutline_net\n")
            readme = os.path.join(tmp, "README.md")
            with open(os.path.join(FIXTURE, "README.md")) as f:
                table = f.read()
            table = table.replace("| `cutline_base` | `base/` | — | — |",
                                  "| `cutline_base` | `base/` | — | OpenSSL |")
            # Two rows no target of this build has: a CUDA plugin (built only where nvcc is
            # found) and an ordinary module.
            table = table.replace("| `app` | `app/main.cc` | `cutline_net` | — |",
                                  "| `app` | `app/main.cc` | `cutline_net` | — |\n"
                                  "| `cutline_gpu` | `gpu/` | `cutline_base` | CUDA |\n"
                                  "| `cutline_gone` | `gone/` | `cutline_base` | — |")
            with open(readme, "w") as f:
                f.write(table)
            root = os.path.join(tmp, "tree")
            subprocess.run(["cp", "-r", FIXTURE, root], check=True)
            with open(os.path.join(root, "base/src/result.cc"), "w") as f:
                f.write('#include "cutline/base/result.h"\n#include <openssl/ssl.h>\n')
            with open(os.path.join(root, "net/src/loop.cc"), "w") as f:
                f.write('#include "cutline/net/loop.h"\n')
            rc, lines = run(root, links, readme)
            self.assertEqual(rc, 1, lines)
            self.assertEqual(lines, [
                "links: README row cutline_gone names no target of this build",
                "module graph: 1 violation(s)",
            ])

    def test_a_cycle_in_the_table_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            readme = os.path.join(tmp, "README.md")
            with open(os.path.join(FIXTURE, "README.md")) as f:
                table = f.read()
            with open(readme, "w") as f:
                f.write(table.replace("| `cutline_base` | `base/` | — | — |",
                                      "| `cutline_base` | `base/` | `cutline_net` | — |"))
            rc, lines = run(FIXTURE, os.path.join(FIXTURE, "links.txt"), readme)
            self.assertEqual(rc, 1)
            self.assertIn("a cycle", "\n".join(lines))


if __name__ == "__main__":
    unittest.main()
