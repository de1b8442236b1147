"""The code tools on a small real project in each language, through Toolbox.call.

Every project (tests/code_samples.py) is written to a tmp dir; the outline of its model
file must be exactly right (kinds, names, signatures, nesting, lines), find_symbol must
find a member by its dotted name, read_file(symbol=) must read exactly that definition
with its decorations, and the repo map must put the file others use first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from code_samples import SAMPLES
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

pytest.importorskip("tree_sitter_language_pack")

OUTLINES: dict[str, list[str]] = {
    "python": [
        "constant TAX_RATE = 0.2  L4-4",
        "class Cart  L8-19",
        "  method total(self, discount: float = 0.0) -> float  L13-15",
        "  method empty(self) -> bool  L18-19",
        "function checkout(cart: Cart) -> None  L22-25",
        "  function log(msg)  L23-24",
    ],
    "javascript": [
        "constant TAX_RATE = 0.2  L2-2",
        "class Cart  L4-12",
        "  method constructor(items)  L5-7",
        "  method total(discount = 0)  L9-11",
        "function checkout(cart)  L14-16",
        "function helper(x)  L18-18",
        "function legacy(a, b)  L19-19",
    ],
    "typescript": [
        "interface Priced  L1-3",
        "  method price(): number  L2-2",
        "type Money = number  L5-5",
        "enum Currency  L7-7",
        "class Cart implements Priced  L9-21",
        "  method constructor(public currency: Currency)  L12-12",
        "  method price(): number  L14-16",
        "  method add(item: Money): void  L18-20",
        "namespace Checkout  L23-27",
        "  function pay(cart: Cart): Money  L24-26",
    ],
    "tsx": [
        "interface ButtonProps  L3-6",
        "function Button({ label, onPress }: ButtonProps)  L8-10",
        "function IconButton(props: ButtonProps): JSX.Element  L12-14",
    ],
    "go": [
        "constant TaxRate = 0.2  L4-4",
        "struct Cart  L7-9",
        "interface Priced  L12-14",
        "  method Total() float64  L13-13",
        "method Total() float64  L17-23",
        "function New(items ...float64) *Cart  L25-27",
    ],
    "rust": [
        "constant TAX_RATE: f64 = 0.2  L2-2",
        "struct Cart  L6-8",
        "trait Priced  L10-12",
        "  method total(&self) -> f64  L11-11",
        "impl Cart(Priced)  L14-18",
        "  method total(&self) -> f64  L15-17",
        "impl Cart  L20-24",
        "  method new(items: Vec<f64>) -> Self  L21-23",
        "enum Currency  L26-29",
    ],
    "java": [
        "class Cart implements Priced  L6-20",
        "  constant TAX_RATE = 0.2  L7-7",
        "  method Cart(List<Double> items)  L10-12",
        "  method total()  L15-17",
        "  enum Currency  L19-19",
        "interface Priced  L22-24",
        "  method total()  L23-23",
    ],
    "c": [
        "macro TAX_RATE 0.2  L4-4",
        "struct cart  L6-9",
        "function cart_total(const struct cart *c)  L12-16",
        "function log_total(const struct cart *c)  L18-20",
    ],
    "cpp": [
        "namespace shop  L4-16",
        "  class Cart  L6-14",
        "    method Cart(std::vector<double> items)  L8-8",
        "    method total() const  L9-9",
        "    method empty() const  L10-10",
    ],
    "csharp": [
        "namespace Shop  L4-22",
        "  class Cart: IPriced  L7-16",
        "    property Items { get; } = new()  L11-11",
        "    method Cart(IEnumerable<double> items)  L13-13",
        "    method Total()  L15-15",
        "  interface IPriced  L18-21",
        "    method Total()  L20-20",
    ],
    "ruby": [
        "module Shop  L1-24",
        "  constant TAX_RATE = 0.2  L2-2",
        "  class Cart  L5-23",
        "    method initialize(items = [])  L8-10",
        "    method total(discount: 0)  L12-14",
        "    method empty?  L16-18",
        "    method build(*items)  L20-22",
    ],
    "php": [
        "namespace Shop  L2-2",
        "constant TAX_RATE = 0.2  L4-4",
        "interface Priced  L6-9",
        "  method total(): float  L8-8",
        "class Cart implements Priced  L12-20",
        "  method __construct(private array $items = [])  L14-14",
        "  method total(): float  L16-19",
        "function checkout(Cart $cart): void  L22-25",
    ],
    "kotlin": [
        "constant TAX_RATE = 0.2  L3-3",
        "interface Priced  L5-7",
        "  method total(): Double  L6-6",
        "class Cart(val items: List<Double>) : Priced  L10-16",
        "  method total(): Double  L11-11",
        "  method of(vararg items: Double)  L14-14",
        "object Checkout  L18-20",
        "  method pay(cart: Cart)  L19-19",
    ],
    "swift": [
        "constant taxRate = 0.2  L3-3",
        "protocol Priced  L5-7",
        "  method total() -> Double  L6-6",
        "struct Cart: Priced  L10-20",
        "  method init(items: [Double])  L13-15",
        "  method total() -> Double  L17-19",
        "extension Cart  L22-24",
        "  method isEmpty() -> Bool  L23-23",
    ],
    "scala": [
        "trait Priced  L3-5",
        "  method total(): Double  L4-4",
        "class Cart(items: List[Double]) extends Priced  L8-10",
        "  method total(): Double  L9-9",
        "object Cart  L12-15",
        "  method of(items: Double*): Cart  L14-14",
    ],
    "bash": [
        "function log()  L4-6",
        "function build_image  L8-11",
    ],
    "lua": [
        "function sum(items)  L5-9",
        "function new(items)  L11-13",
        "function total()  L15-17",
    ],
}

# (file, symbol, find_symbol's row, first and last line read_file(symbol=) shows)
SYMBOLS: dict[str, tuple[str, str, str, int, int]] = {
    "python": ("shop/cart.py", "Cart.total",
               "shop/cart.py:13: method Cart.total(self, discount: float = 0.0) -> float", 13, 15),
    "javascript": ("src/cart.js", "Cart.total",
                   "src/cart.js:9: method Cart.total(discount = 0)", 9, 11),
    "typescript": ("src/cart.ts", "Checkout.pay",
                   "src/cart.ts:24: function Checkout.pay(cart: Cart): Money", 24, 26),
    "tsx": ("ui/Button.tsx", "IconButton",
            "ui/Button.tsx:12: function IconButton(props: ButtonProps): JSX.Element", 12, 14),
    "go": ("cart/cart.go", "Cart.Total", "cart/cart.go:17: method Cart.Total() float64", 16, 23),
    "rust": ("src/cart.rs", "Cart.new",
             "src/cart.rs:21: method Cart.new(items: Vec<f64>) -> Self", 21, 23),
    "java": ("src/shop/Cart.java", "Cart.total", "src/shop/Cart.java:15: method Cart.total()",
             14, 17),
    "c": ("src/cart.c", "cart_total",
          "src/cart.c:12: function cart_total(const struct cart *c)", 11, 16),
    "cpp": ("src/cart.cpp", "Cart.total", "src/cart.cpp:7: method shop.Cart.total() const", 7, 11),
    "csharp": ("Shop/Cart.cs", "Cart.Total", "Shop/Cart.cs:15: method Shop.Cart.Total()", 15, 15),
    "ruby": ("lib/shop/cart.rb", "Cart#empty?",
             "lib/shop/cart.rb:16: method Shop.Cart.empty?", 16, 18),
    "php": ("src/Cart.php", "Cart.total", "src/Cart.php:16: method Cart.total(): float", 16, 19),
    "kotlin": ("src/Cart.kt", "Checkout.pay",
               "src/Cart.kt:19: method Checkout.pay(cart: Cart)", 19, 19),
    "swift": ("Sources/Cart.swift", "Cart.init",
              "Sources/Cart.swift:13: method Cart.init(items: [Double])", 13, 15),
    "scala": ("src/Cart.scala", "Cart.of",
              "src/Cart.scala:14: method Cart.of(items: Double*): Cart", 14, 14),
    "bash": ("scripts/lib.sh", "build_image", "scripts/lib.sh:8: function build_image", 8, 11),
    "lua": ("cart.lua", "M.total", "cart.lua:15: function M.total()", 15, 17),
}


def project(tmp_path: Path, language: str) -> tuple[Path, Toolbox]:
    root = tmp_path / language
    for rel, text in SAMPLES[language].items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root, filesystem_toolbox(root, read_only=True)


def test_every_listed_language_has_a_project() -> None:
    listed = {"python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp",
              "csharp", "ruby", "php", "kotlin", "swift", "scala", "bash", "lua"}
    assert set(SAMPLES) == set(OUTLINES) == set(SYMBOLS) == listed


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_outline_lists_the_definitions_nested_with_lines(tmp_path: Path, language: str) -> None:
    _, box = project(tmp_path, language)
    model = next(iter(SAMPLES[language]))
    assert box.call("outline", {"path": model}).split("\n") == OUTLINES[language]


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_find_symbol_and_read_file_symbol(tmp_path: Path, language: str) -> None:
    root, box = project(tmp_path, language)
    path, symbol, row, first, last = SYMBOLS[language]
    assert box.call("find_symbol", {"name": symbol}).split("\n")[0] == row
    *read, footer = box.call("read_file", {"path": path, "symbol": symbol}).split("\n")
    lines = (root / path).read_text().split("\n")
    assert read == [f"{n}\t{lines[n - 1]}" for n in range(first, last + 1)]
    assert footer.startswith((f"[showing lines {first}-{last} of ", f"[lines {first}-{last};"))


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_repo_map_puts_the_used_file_first(tmp_path: Path, language: str) -> None:
    _, box = project(tmp_path, language)
    model = next(iter(SAMPLES[language]))
    found = box.call("repo_map", {"budget": 2000}).split("\n")
    assert found[0].startswith("[repo map of .: ")
    files = [line[:-1] for line in found[1:] if not line.startswith(" ")]
    # C++: the header and its implementation define the same names and tie.
    assert files[0] == model or (language == "cpp" and model in files)
    start = found.index(f"{model}:") + 1
    section = [line for line in found[start:] if line.startswith(" ")]
    section = section[: next((i for i, line in enumerate(found[start:])
                              if not line.startswith(" ")), len(section))]
    outline = ["  " + line for line in OUTLINES[language]]
    assert section and set(section) <= set(outline)
    assert section == sorted(section, key=outline.index)  # in file order, nested as outlined
