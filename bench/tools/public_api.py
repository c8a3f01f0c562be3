#!/usr/bin/env python3
"""burn-stoker's public surface, one line per item, from rustdoc's JSON output.

Usage:
  python3 bench/tools/public_api.py JSON                 print the list
  python3 bench/tools/public_api.py JSON --check FILE    fail (exit 1) with a diff when FILE differs
  python3 bench/tools/public_api.py JSON --write FILE    write the list into FILE

JSON is what rustdoc writes with `-Z unstable-options --output-format json` in RUSTDOCFLAGS
(`target/doc/burn_stoker.json`; `.ci/run` builds it with `cargo doc` and the docs' features,
through `.ci/rustdoc`, which allows the unstable flag on the stable toolchain). The list holds every
public path a user can name (modules, re-exports, the prelude included), each type's public
fields and variants, each trait's items, every inherent method and associated item with its
signature, and which traits each type implements (the auto traits marked `auto`), sorted. A
change to the surface shows as a diff of the checked-in `runtime/public-api.txt`: commit the new
list with the change that made it (`--write`), so that every change to it is deliberate.

It also fails, before printing or comparing anything, when a public type implements `Callback`
without `CallbackKind` (WITHOUT_KIND lists the exceptions, each with its reason): every callback
type is an order target, named as its kind.
"""

import difflib
import json
import re
import sys


# The auto traits a user's code can rely on (`Freeze` and `UnsafeUnpin` are the compiler's own).
AUTO_TRAITS = {"Send", "Sync", "Unpin", "UnwindSafe", "RefUnwindSafe"}


class Surface:
    def __init__(self, doc):
        self.index = doc["index"]
        self.paths = doc["paths"]
        self.lines = set()
        self.seen = set()
        self.named = {}

    def item(self, id_):
        return self.index.get(str(id_))

    # --- types, rendered as Rust writes them ---------------------------------------------
    def ty(self, t):
        if t is None:
            return "()"
        if isinstance(t, str):
            return t
        (kind, v), = t.items()
        if kind == "resolved_path":
            return self.path(v)
        if kind == "primitive" or kind == "generic":
            return v
        if kind == "borrowed_ref":
            life = f"{v['lifetime']} " if v.get("lifetime") else ""
            return f"&{life}{'mut ' if v['is_mutable'] else ''}{self.ty(v['type'])}"
        if kind == "raw_pointer":
            return f"*{'mut' if v['is_mutable'] else 'const'} {self.ty(v['type'])}"
        if kind == "tuple":
            inner = ", ".join(self.ty(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if kind == "slice":
            return f"[{self.ty(v)}]"
        if kind == "array":
            return f"[{self.ty(v['type'])}; {v['len']}]"
        if kind == "impl_trait":
            return "impl " + self.bounds(v)
        if kind == "dyn_trait":
            parts = [self.poly_trait(p) for p in v["traits"]]
            if v.get("lifetime"):
                parts.append(v["lifetime"])
            return "dyn " + " + ".join(parts)
        if kind == "qualified_path":
            trait = self.path(v["trait"]) if v.get("trait") else ""
            if not trait:
                return f"{self.ty(v['self_type'])}::{v['name']}{self.args(v.get('args'))}"
            return f"<{self.ty(v['self_type'])} as {trait}>::{v['name']}{self.args(v.get('args'))}"
        if kind == "function_pointer":
            sig = v["sig"]
            inputs = ", ".join(self.ty(x[1]) for x in sig["inputs"])
            out = f" -> {self.ty(sig['output'])}" if sig.get("output") else ""
            return f"fn({inputs}){out}"
        if kind == "infer":
            return "_"
        return json.dumps(t, sort_keys=True)

    def path(self, p):
        return p.get("path", p.get("name", "?")) + self.args(p.get("args"))

    def args(self, a):
        if not a:
            return ""
        if isinstance(a, str):
            return "(..)"
        if "angle_bracketed" in a:
            ab = a["angle_bracketed"]
            parts = []
            for x in ab.get("args", []):
                if isinstance(x, str):
                    parts.append("_")
                elif "type" in x:
                    parts.append(self.ty(x["type"]))
                elif "lifetime" in x:
                    parts.append(x["lifetime"])
                elif "const" in x:
                    parts.append(x["const"].get("expr", "?"))
            for c in ab.get("constraints", []):
                b = c["binding"]
                if "equality" in b:
                    eq = b["equality"]
                    val = self.ty(eq["type"]) if "type" in eq else json.dumps(eq)
                    parts.append(f"{c['name']} = {val}")
                else:
                    parts.append(f"{c['name']}: {self.bounds(b['constraint'])}")
            return f"<{', '.join(parts)}>" if parts else ""
        if "parenthesized" in a:
            p = a["parenthesized"]
            out = f" -> {self.ty(p['output'])}" if p.get("output") else ""
            return f"({', '.join(self.ty(x) for x in p['inputs'])}){out}"
        return json.dumps(a, sort_keys=True)

    def poly_trait(self, p):
        hr = self.hrtb(p.get("generic_params", []))
        return hr + self.path(p["trait"])

    def hrtb(self, params):
        names = [x["name"] for x in params]
        return f"for<{', '.join(names)}> " if names else ""

    def bounds(self, bs):
        out = []
        for b in bs:
            if "trait_bound" in b:
                tb = b["trait_bound"]
                mod = "?" if tb.get("modifier") == "maybe" else ""
                out.append(mod + self.hrtb(tb.get("generic_params", [])) + self.path(tb["trait"]))
            elif "outlives" in b:
                out.append(b["outlives"])
            else:
                out.append(json.dumps(b, sort_keys=True))
        return " + ".join(out)

    def generics(self, g):
        params = []
        for p in g.get("params", []):
            k = p["kind"]
            if "lifetime" in k:
                params.append(p["name"])
            elif "type" in k:
                if k["type"].get("is_synthetic"):
                    continue
                b = self.bounds(k["type"].get("bounds", []))
                d = k["type"].get("default")
                params.append(p["name"] + (f": {b}" if b else "") + (f" = {self.ty(d)}" if d else ""))
            elif "const" in k:
                params.append(f"const {p['name']}: {self.ty(k['const']['type'])}")
        text = f"<{', '.join(params)}>" if params else ""
        preds = []
        for w in g.get("where_predicates", []):
            if "bound_predicate" in w:
                bp = w["bound_predicate"]
                preds.append(f"{self.hrtb(bp.get('generic_params', []))}{self.ty(bp['type'])}: {self.bounds(bp['bounds'])}")
            elif "lifetime_predicate" in w:
                lp = w["lifetime_predicate"]
                preds.append(f"{lp['lifetime']}: {' + '.join(lp['outlives'])}")
            else:
                preds.append(json.dumps(w, sort_keys=True))
        return text, (" where " + ", ".join(preds) if preds else "")

    def receiver(self, t):
        text = self.ty(t)
        return {"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(text, f"self: {text}")

    def fn(self, name, f):
        gen, where = self.generics(f["generics"])
        sig = f["sig"]
        inputs = ", ".join(f"{n}: {self.ty(t)}" if n != "self" else self.receiver(t) for n, t in sig["inputs"])
        out = f" -> {self.ty(sig['output'])}" if sig.get("output") else ""
        h = f["header"]
        quals = ("const " if h.get("is_const") else "") + ("async " if h.get("is_async") else "") + ("unsafe " if h.get("is_unsafe") else "")
        return f"{quals}fn {name}{gen}({inputs}){out}{where}"

    # --- the walk: every public path of every item, then each item once, at its shortest ---
    def add(self, line):
        self.lines.add(line)

    def collect(self, id_, path):
        """Every path under which `id_` (a module's child, `path` included) can be named."""
        it = self.item(id_)
        if it is None:
            return
        (kind, v), = it["inner"].items()
        if kind == "use":
            self.reexport(v, path.rsplit("::", 1)[0])
            return
        if it["visibility"] != "public":
            return
        if (id_, path) in self.seen:
            return
        self.seen.add((id_, path))
        self.named.setdefault(id_, set()).add(path)
        if kind == "module":
            for child in v["items"]:
                name = (self.item(child) or {}).get("name") or ""
                self.collect(child, f"{path}::{name}")

    def reexport(self, u, parent):
        target = u.get("id")
        if target is not None and self.item(target) is not None:
            if u["is_glob"]:
                inner = self.item(target)["inner"]
                if "module" in inner:
                    for child in inner["module"]["items"]:
                        c = self.item(child)
                        if c is not None:
                            self.collect(child, f"{parent}::{c['name']}")
                return
            self.collect(target, f"{parent}::{u['name']}")
            return
        where = f"{parent}::*" if u["is_glob"] else f"{parent}::{u['name']}"
        self.add(f"use {where} = {u['source']}")

    def emit(self):
        for id_, paths in self.named.items():
            ordered = sorted(paths, key=lambda p: (p.count("::"), "::prelude::" in p, p))
            canonical = ordered[0]
            for other in ordered[1:]:
                self.add(f"use {other} = {canonical}")
            self.describe(id_, canonical)

    def describe(self, id_, path):
        it = self.item(id_)
        (kind, v), = it["inner"].items()
        if kind == "module":
            self.add(f"mod {path}")
        elif kind in ("struct", "enum", "union", "trait"):
            self.type_item(kind, v, path)
        elif kind == "function":
            self.add(f"{self.fn(path, v)}")
        elif kind == "constant":
            self.add(f"const {path}: {self.ty(v['type'])}")
        elif kind == "static":
            self.add(f"static {path}: {self.ty(v['type'])}")
        elif kind == "type_alias":
            gen, _ = self.generics(v["generics"])
            self.add(f"type {path}{gen} = {self.ty(v['type'])}")
        elif kind in ("macro", "proc_macro"):
            self.add(f"macro {path}")
        else:
            self.add(f"{kind} {path}")

    def type_item(self, kind, v, path):
        gen, where = self.generics(v["generics"])
        self.add(f"{kind} {path}{gen}{where}")
        if kind == "struct":
            k = v["kind"]
            if isinstance(k, dict) and "plain" in k:
                for f in k["plain"]["fields"]:
                    fit = self.item(f)
                    if fit and fit["visibility"] == "public":
                        self.add(f"field {path}.{fit['name']}: {self.ty(fit['inner']['struct_field'])}")
            elif isinstance(k, dict) and "tuple" in k:
                for n, f in enumerate(k["tuple"]):
                    fit = self.item(f) if f is not None else None
                    if fit and fit["visibility"] == "public":
                        self.add(f"field {path}.{n}: {self.ty(fit['inner']['struct_field'])}")
        if kind == "enum":
            for var in v["variants"]:
                vit = self.item(var)
                vk = vit["inner"]["variant"]["kind"]
                fields = ""
                if isinstance(vk, dict) and "tuple" in vk:
                    fields = "(" + ", ".join(self.ty(self.item(f)["inner"]["struct_field"]) for f in vk["tuple"] if f is not None) + ")"
                elif isinstance(vk, dict) and "struct" in vk:
                    fields = " { " + ", ".join(f"{self.item(f)['name']}: {self.ty(self.item(f)['inner']['struct_field'])}" for f in vk["struct"]["fields"]) + " }"
                self.add(f"variant {path}::{vit['name']}{fields}")
        if kind == "trait":
            for member in v["items"]:
                self.assoc(member, path, f"trait item {path}::")
            return
        for impl_id in v.get("impls", []):
            self.impl(self.item(impl_id), path)

    def assoc(self, id_, path, prefix):
        m = self.item(id_)
        (mk, mv), = m["inner"].items()
        if mk == "function":
            self.add(prefix + self.fn(m["name"], mv))
        elif mk == "assoc_type":
            b = self.bounds(mv.get("bounds", []))
            self.add(f"{prefix}type {m['name']}" + (f": {b}" if b else ""))
        elif mk == "assoc_const":
            self.add(f"{prefix}const {m['name']}: {self.ty(mv['type'])}")

    def impl(self, it, path):
        if it is None:
            return
        imp = it["inner"]["impl"]
        if imp.get("blanket_impl") is not None:
            return
        if imp.get("trait") is None:
            for member in imp["items"]:
                m = self.item(member)
                if m and m["visibility"] == "public":
                    self.assoc(member, path, f"{path}::")
            return
        trait = self.path(imp["trait"])
        if imp.get("is_synthetic") and trait not in AUTO_TRAITS:
            return
        auto = " (auto)" if imp.get("is_synthetic") else ""
        neg = "!" if imp.get("is_negative") else ""
        gen, where = self.generics(imp["generics"])
        self.add(f"{path}: impl{gen} {neg}{trait} for {self.ty(imp['for'])}{where}{auto}")


def surface(doc):
    s = Surface(doc)
    s.collect(doc["root"], s.item(doc["root"])["name"])
    s.emit()
    return sorted(s.lines)


# Public callback types that are no order target, each with the reason.
WITHOUT_KIND = {
    "burn_stoker::burn_train::TrainMetric": "burn-train's metrics, named `BurnMetric(...)`, are not order targets",
}


def kindless(lines):
    """The public types that implement `Callback` but not `CallbackKind` (the name an order
    target is keyed by, which a built-in gets from `kind!` beside its type), less WITHOUT_KIND."""
    callbacks, kinds = set(), set()
    for line in lines:
        path, _, rest = line.partition(": impl")
        if re.search(r"\bCallbackKind for ", rest):
            kinds.add(path)
        elif re.search(r"\bCallback<\w+> for ", rest):
            callbacks.add(path)
    return sorted(callbacks - kinds - set(WITHOUT_KIND))


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    lines = [l + "\n" for l in surface(json.load(open(args[0])))]
    missing = kindless(lines)
    if missing:
        print("public callback types without a kind (`crate::kind::kind!(Type);` beside the type):")
        print("".join(f"  {path}\n" for path in missing), end="")
        return 1
    if "--write" in args:
        open(args[args.index("--write") + 1], "w").writelines(lines)
        return 0
    if "--check" in args:
        path = args[args.index("--check") + 1]
        old = open(path).readlines()
        if old == lines:
            print(f"the public API is {path}'s ({len(lines)} lines)")
            return 0
        sys.stdout.writelines(difflib.unified_diff(old, lines, path, "the crate as built"))
        print(f"\nthe public API differs from {path}: if the change is deliberate, write the new list with\n"
              f"  python3 bench/tools/public_api.py {args[0]} --write {path}\nand commit it with the change.")
        return 1
    sys.stdout.writelines(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
