"""Small real projects, one per language the code tools read, for tests/test_code_languages.py.

Each project has a file that defines a type with members (``MODEL``) and a file that uses
it, so the repo map has a reference to rank. Written into a tmp dir by the tests.
"""

from __future__ import annotations

SAMPLES: dict[str, dict[str, str]] = {
    "python": {
        "shop/cart.py": '''"""A shopping cart."""
from dataclasses import dataclass

TAX_RATE = 0.2


@dataclass
class Cart:
    """Items and their prices."""

    items: list

    def total(self, discount: float = 0.0) -> float:
        """The price to pay."""
        return sum(self.items) * (1 + TAX_RATE) - discount

    @property
    def empty(self) -> bool:
        return not self.items


async def checkout(cart: Cart) -> None:
    def log(msg):
        print(msg)
    log(cart.total())
''',
        "app.py": '''from shop.cart import Cart, checkout


def main():
    cart = Cart([1, 2])
    print(cart.total())
''',
    },
    "javascript": {
        "src/cart.js": '''// A shopping cart.
export const TAX_RATE = 0.2;

export class Cart {
  constructor(items) {
    this.items = items;
  }

  total(discount = 0) {
    return this.items.reduce((a, b) => a + b, 0) * (1 + TAX_RATE) - discount;
  }
}

export const checkout = async (cart) => {
  console.log(cart.total());
};

function helper(x) { return x; }
module.exports.legacy = function (a, b) { return a + b; };
''',
        "src/app.jsx": '''import { Cart, checkout } from "./cart";

export function App() {
  const cart = new Cart([1, 2]);
  return <div onClick={() => checkout(cart)}>{cart.total()}</div>;
}
''',
    },
    "typescript": {
        "src/cart.ts": '''export interface Priced {
  price(): number;
}

export type Money = number;

export enum Currency { EUR, USD }

export class Cart implements Priced {
  private items: Money[] = [];

  constructor(public currency: Currency) {}

  price(): number {
    return this.items.reduce((a, b) => a + b, 0);
  }

  add(item: Money): void {
    this.items.push(item);
  }
}

export namespace Checkout {
  export function pay(cart: Cart): Money {
    return cart.price();
  }
}
''',
        "src/main.ts": '''import { Cart, Currency } from "./cart";

const cart = new Cart(Currency.EUR);
cart.add(3);
console.log(cart.price());
''',
    },
    "tsx": {
        "ui/Button.tsx": '''import React from "react";

export interface ButtonProps {
  label: string;
  onPress: () => void;
}

export function Button({ label, onPress }: ButtonProps) {
  return <button onClick={onPress}>{label}</button>;
}

export const IconButton = (props: ButtonProps): JSX.Element => (
  <Button {...props} />
);
''',
        "ui/App.tsx": '''import { Button } from "./Button";

export default function App() {
  return <Button label="Pay" onPress={() => {}} />;
}
''',
    },
    "go": {
        "cart/cart.go": '''package cart

// TaxRate is added to every total.
const TaxRate = 0.2

// Cart holds the items to pay for.
type Cart struct {
	Items []float64
}

// Priced is anything with a price.
type Priced interface {
	Total() float64
}

// Total is the price to pay.
func (c *Cart) Total() float64 {
	sum := 0.0
	for _, item := range c.Items {
		sum += item
	}
	return sum * (1 + TaxRate)
}

func New(items ...float64) *Cart {
	return &Cart{Items: items}
}
''',
        "main.go": '''package main

import "example.com/shop/cart"

func main() {
	c := cart.New(1, 2)
	println(c.Total())
}
''',
    },
    "rust": {
        "src/cart.rs": '''/// Added to every total.
pub const TAX_RATE: f64 = 0.2;

/// Items to pay for.
#[derive(Debug, Default)]
pub struct Cart {
    items: Vec<f64>,
}

pub trait Priced {
    fn total(&self) -> f64;
}

impl Priced for Cart {
    fn total(&self) -> f64 {
        self.items.iter().sum::<f64>() * (1.0 + TAX_RATE)
    }
}

impl Cart {
    pub fn new(items: Vec<f64>) -> Self {
        Cart { items }
    }
}

pub enum Currency {
    Eur,
    Usd,
}
''',
        "src/main.rs": '''mod cart;
use cart::{Cart, Priced};

fn main() {
    let cart = Cart::new(vec![1.0, 2.0]);
    println!("{}", cart.total());
}
''',
    },
    "java": {
        "src/shop/Cart.java": '''package shop;

import java.util.List;

/** Items to pay for. */
public class Cart implements Priced {
    public static final double TAX_RATE = 0.2;
    private final List<Double> items;

    public Cart(List<Double> items) {
        this.items = items;
    }

    @Override
    public double total() {
        return items.stream().mapToDouble(Double::doubleValue).sum() * (1 + TAX_RATE);
    }

    enum Currency { EUR, USD }
}

interface Priced {
    double total();
}
''',
        "src/shop/Main.java": '''package shop;

import java.util.List;

public class Main {
    public static void main(String[] args) {
        Cart cart = new Cart(List.of(1.0, 2.0));
        System.out.println(cart.total());
    }
}
''',
    },
    "c": {
        "src/cart.c": '''#include <stdio.h>
#include "cart.h"

#define TAX_RATE 0.2

struct cart {
    double *items;
    int count;
};

/* The price to pay. */
double cart_total(const struct cart *c) {
    double sum = 0;
    for (int i = 0; i < c->count; i++) sum += c->items[i];
    return sum * (1 + TAX_RATE);
}

static void log_total(const struct cart *c) {
    printf("%f\\n", cart_total(c));
}
''',
        "src/main.c": '''#include "cart.h"

int main(void) {
    struct cart c = {0};
    return (int)cart_total(&c);
}
''',
    },
    "cpp": {
        "src/cart.hpp": '''#pragma once
#include <vector>

namespace shop {

class Cart {
public:
    explicit Cart(std::vector<double> items);
    double total() const;
    bool empty() const { return items_.empty(); }

private:
    std::vector<double> items_;
};

}  // namespace shop
''',
        "src/cart.cpp": '''#include "cart.hpp"

namespace shop {

Cart::Cart(std::vector<double> items) : items_(std::move(items)) {}

double Cart::total() const {
    double sum = 0;
    for (double item : items_) sum += item;
    return sum;
}

}  // namespace shop

int main() {
    shop::Cart cart({1.0, 2.0});
    return static_cast<int>(cart.total());
}
''',
    },
    "csharp": {
        "Shop/Cart.cs": '''using System.Collections.Generic;
using System.Linq;

namespace Shop
{
    /// <summary>Items to pay for.</summary>
    public class Cart : IPriced
    {
        public const double TaxRate = 0.2;

        public List<double> Items { get; } = new();

        public Cart(IEnumerable<double> items) => Items.AddRange(items);

        public double Total() => Items.Sum() * (1 + TaxRate);
    }

    public interface IPriced
    {
        double Total();
    }
}
''',
        "Shop/Program.cs": '''namespace Shop;

public static class Program
{
    public static void Main()
    {
        var cart = new Cart(new[] { 1.0, 2.0 });
        System.Console.WriteLine(cart.Total());
    }
}
''',
    },
    "ruby": {
        "lib/shop/cart.rb": '''module Shop
  TAX_RATE = 0.2

  # Items to pay for.
  class Cart
    attr_reader :items

    def initialize(items = [])
      @items = items
    end

    def total(discount: 0)
      items.sum * (1 + TAX_RATE) - discount
    end

    def empty?
      items.empty?
    end

    def self.build(*items)
      new(items)
    end
  end
end
''',
        "bin/shop.rb": '''require_relative "../lib/shop/cart"

cart = Shop::Cart.build(1, 2)
puts cart.total
''',
    },
    "php": {
        "src/Cart.php": '''<?php
namespace Shop;

const TAX_RATE = 0.2;

interface Priced
{
    public function total(): float;
}

/** Items to pay for. */
final class Cart implements Priced
{
    public function __construct(private array $items = []) {}

    public function total(): float
    {
        return array_sum($this->items) * (1 + TAX_RATE);
    }
}

function checkout(Cart $cart): void
{
    echo $cart->total();
}
''',
        "index.php": '''<?php
require "src/Cart.php";

use Shop\\Cart;

$cart = new Cart([1, 2]);
\\Shop\\checkout($cart);
''',
    },
    "kotlin": {
        "src/Cart.kt": '''package shop

const val TAX_RATE = 0.2

interface Priced {
    fun total(): Double
}

/** Items to pay for. */
data class Cart(val items: List<Double>) : Priced {
    override fun total(): Double = items.sum() * (1 + TAX_RATE)

    companion object {
        fun of(vararg items: Double) = Cart(items.toList())
    }
}

object Checkout {
    fun pay(cart: Cart) = println(cart.total())
}
''',
        "src/Main.kt": '''package shop

fun main() {
    val cart = Cart.of(1.0, 2.0)
    Checkout.pay(cart)
}
''',
    },
    "swift": {
        "Sources/Cart.swift": '''import Foundation

let taxRate = 0.2

protocol Priced {
    func total() -> Double
}

/// Items to pay for.
struct Cart: Priced {
    var items: [Double]

    init(items: [Double]) {
        self.items = items
    }

    func total() -> Double {
        items.reduce(0, +) * (1 + taxRate)
    }
}

extension Cart {
    func isEmpty() -> Bool { items.isEmpty }
}
''',
        "Sources/main.swift": '''let cart = Cart(items: [1, 2])
print(cart.total())
''',
    },
    "scala": {
        "src/Cart.scala": '''package shop

trait Priced {
  def total(): Double
}

/** Items to pay for. */
case class Cart(items: List[Double]) extends Priced {
  def total(): Double = items.sum * (1 + Cart.TaxRate)
}

object Cart {
  val TaxRate = 0.2
  def of(items: Double*): Cart = Cart(items.toList)
}
''',
        "src/Main.scala": '''package shop

object Main {
  def main(args: Array[String]): Unit = println(Cart.of(1.0, 2.0).total())
}
''',
    },
    "bash": {
        "scripts/lib.sh": '''#!/usr/bin/env bash
# Helpers for the release scripts.

log() {
  echo "[release] $*" >&2
}

function build_image {
  log "building $1"
  docker build -t "$1" .
}
''',
        "scripts/deploy": '''#!/bin/bash
source "$(dirname "$0")/lib.sh"

deploy() {
  build_image "shop:latest"
  log "done"
}

deploy
''',
    },
    "lua": {
        "cart.lua": '''local M = {}

M.TAX_RATE = 0.2

local function sum(items)
  local total = 0
  for _, item in ipairs(items) do total = total + item end
  return total
end

function M.new(items)
  return setmetatable({ items = items }, { __index = M })
end

function M:total()
  return sum(self.items) * (1 + M.TAX_RATE)
end

return M
''',
        "main.lua": '''local cart = require("cart")
local c = cart.new({ 1, 2 })
print(c:total())
''',
    },
}
