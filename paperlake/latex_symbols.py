"""The LaTeX vocabulary both LaTeX readers share: the one that writes LaTeX from a PDF's glyphs
(:mod:`paperlake.parsing.glyph_latex`) and the one that reads display equations into formulas
(:mod:`paperlake.formulas.latex`).

One table says which command a Unicode character is, faithfully: ``ε`` (U+03B5) is ``\\varepsilon`` and ``ϵ``
(U+03F5) is ``\\epsilon``, ``φ`` is ``\\varphi`` and ``ϕ`` is ``\\phi``, as Unicode's math alphabets and TeX's fonts
pair them. Whoever needs a coarser key says so in one place: the formula chain reads a variant letter as its letter
(:data:`LETTER_VARIANTS`: ``\\varepsilon`` and ``\\epsilon`` are one parameter), the glyph reader's comparison key
only ``\\varepsilon`` (:func:`paperlake.parsing.glyph_latex.normalize_latex`).
"""

from __future__ import annotations

# Unicode letter → LaTeX; Greek capitals that print as Latin ones are those Latin letters.
GREEK_LETTERS: dict[str, str] = {
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ϵ": r"\epsilon", "ε": r"\varepsilon",
    "ζ": r"\zeta", "η": r"\eta", "θ": r"\theta", "ϑ": r"\vartheta", "ι": r"\iota", "κ": r"\kappa",
    "ϰ": r"\varkappa", "λ": r"\lambda", "μ": r"\mu", "µ": r"\mu", "ν": r"\nu", "ξ": r"\xi", "π": r"\pi",
    "ϖ": r"\varpi", "ρ": r"\rho", "ϱ": r"\varrho", "σ": r"\sigma", "ς": r"\varsigma", "τ": r"\tau",
    "υ": r"\upsilon", "ϕ": r"\phi", "φ": r"\varphi", "χ": r"\chi", "ψ": r"\psi", "ω": r"\omega",
    "Γ": r"\Gamma", "Δ": r"\Delta", "∆": r"\Delta", "Θ": r"\Theta", "Λ": r"\Lambda", "Ξ": r"\Xi", "Π": r"\Pi",
    "Σ": r"\Sigma", "Υ": r"\Upsilon", "ϒ": r"\Upsilon", "Φ": r"\Phi", "Ψ": r"\Psi", "Ω": r"\Omega",
    "ο": "o", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
    "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Χ": "X",
}

# Greek letter commands (without the backslash), with the variants and the letter-like ``\\ell``/``\\hbar``.
GREEK_NAMES = frozenset(
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa varkappa lambda mu nu xi omicron pi "
    "varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma "
    "Upsilon Phi Psi Omega ell hbar digamma".split()
)
# A variant letter → the letter it is a shape of.
LETTER_VARIANTS = {
    r"\varepsilon": r"\epsilon", r"\vartheta": r"\theta", r"\varphi": r"\phi", r"\varrho": r"\rho",
    r"\varsigma": r"\sigma", r"\varpi": r"\pi", r"\varkappa": r"\kappa",
}

# Unicode symbol → (LaTeX, class). Classes follow TeX's: rel, bin, ord, open, close, fence (| and ‖, side decided by
# position), punct, bigop, accent, radical.
SYMBOLS: dict[str, tuple[str, str]] = {
    **{c: (c, "rel") for c in "=<>"},
    **{c: (c, "bin") for c in "+*"},
    **{c: (c, "punct") for c in ",;:.!?"},
    "(": ("(", "open"), "[": ("[", "open"), ")": (")", "close"), "]": ("]", "close"),
    "{": (r"\{", "open"), "}": (r"\}", "close"), "|": ("|", "fence"), "/": ("/", "ord"),
    "-": ("-", "bin"), "−": ("-", "bin"), "–": ("-", "bin"), "'": (r"\prime", "prime"), "′": (r"\prime", "prime"),
    "″": (r"\prime\prime", "prime"), "#": (r"\#", "ord"), "%": (r"\%", "ord"), "&": (r"\&", "ord"),
    "$": (r"\$", "ord"), "_": (r"\_", "ord"), "@": ("@", "ord"), "\\": (r"\backslash", "ord"),
    # relations
    "≤": (r"\leq", "rel"), "≦": (r"\leq", "rel"), "⩽": (r"\leq", "rel"), "≥": (r"\geq", "rel"),
    "≧": (r"\geq", "rel"), "⩾": (r"\geq", "rel"), "≠": (r"\neq", "rel"), "≈": (r"\approx", "rel"),
    "≡": (r"\equiv", "rel"), "∼": (r"\sim", "rel"), "~": (r"\sim", "rel"), "≃": (r"\simeq", "rel"),
    "≅": (r"\cong", "rel"), "∝": (r"\propto", "rel"), "∈": (r"\in", "rel"), "∉": (r"\notin", "rel"),
    "∋": (r"\ni", "rel"), "⊂": (r"\subset", "rel"), "⊃": (r"\supset", "rel"), "⊆": (r"\subseteq", "rel"),
    "⊇": (r"\supseteq", "rel"), "⊊": (r"\subsetneq", "rel"), "→": (r"\rightarrow", "rel"),
    "←": (r"\leftarrow", "rel"), "↔": (r"\leftrightarrow", "rel"), "⇒": (r"\Rightarrow", "rel"),
    "⇐": (r"\Leftarrow", "rel"), "⇔": (r"\Leftrightarrow", "rel"), "↦": (r"\mapsto", "rel"),
    "⟶": (r"\longrightarrow", "rel"), "⟵": (r"\longleftarrow", "rel"), "⟹": (r"\Longrightarrow", "rel"),
    "⟸": (r"\Longleftarrow", "rel"), "⟺": (r"\iff", "rel"), "↑": (r"\uparrow", "rel"),
    "↓": (r"\downarrow", "rel"), "≪": (r"\ll", "rel"), "≫": (r"\gg", "rel"), "≺": (r"\prec", "rel"),
    "≻": (r"\succ", "rel"), "⪯": (r"\preceq", "rel"), "⪰": (r"\succeq", "rel"), "≼": (r"\preceq", "rel"),
    "≽": (r"\succeq", "rel"), "⊢": (r"\vdash", "rel"), "⊣": (r"\dashv", "rel"), "⊨": (r"\models", "rel"),
    "∣": (r"\mid", "rel"), "≔": (":=", "rel"), "≜": (r"\triangleq", "rel"), "≐": (r"\doteq", "rel"),
    "≲": (r"\lesssim", "rel"), "≳": (r"\gtrsim", "rel"), "⊥": (r"\perp", "ord"), "∶": (":", "rel"),
    # binary operators
    "±": (r"\pm", "bin"), "∓": (r"\mp", "bin"), "×": (r"\times", "bin"), "·": (r"\cdot", "bin"),
    "⋅": (r"\cdot", "bin"), "∗": ("*", "bin"), "⋆": (r"\star", "bin"), "∘": (r"\circ", "bin"),
    "◦": (r"\circ", "bin"), "∙": (r"\bullet", "bin"), "•": (r"\bullet", "bin"), "÷": (r"\div", "bin"),
    "⊕": (r"\oplus", "bin"), "⊗": (r"\otimes", "bin"), "⊙": (r"\odot", "bin"), "⊖": (r"\ominus", "bin"),
    "⊘": (r"\oslash", "bin"), "∩": (r"\cap", "bin"), "∪": (r"\cup", "bin"), "∧": (r"\wedge", "bin"),
    "∨": (r"\vee", "bin"), "∖": (r"\setminus", "bin"), "⊔": (r"\sqcup", "bin"), "⊓": (r"\sqcap", "bin"),
    "†": (r"\dagger", "ord"), "‡": (r"\ddagger", "ord"), "∕": ("/", "ord"), "⋄": (r"\diamond", "bin"),
    "⊎": (r"\uplus", "bin"), "≀": (r"\wr", "bin"),
    # ordinary symbols
    "∞": (r"\infty", "ord"), "∂": (r"\partial", "ord"), "∇": (r"\nabla", "ord"), "∅": (r"\emptyset", "ord"),
    "∀": (r"\forall", "ord"), "∃": (r"\exists", "ord"), "∄": (r"\nexists", "ord"), "¬": (r"\neg", "ord"),
    "ℓ": (r"\ell", "ord"), "ℏ": (r"\hbar", "ord"), "ℵ": (r"\aleph", "ord"), "…": (r"\ldots", "ord"),
    "⋯": (r"\cdots", "ord"), "⋮": (r"\vdots", "ord"), "⋱": (r"\ddots", "ord"), "∠": (r"\angle", "ord"),
    "♯": (r"\sharp", "ord"), "♭": (r"\flat", "ord"), "□": (r"\square", "ord"), "△": (r"\triangle", "ord"),
    "ℜ": (r"\Re", "ord"), "ℑ": (r"\Im", "ord"), "℘": (r"\wp", "ord"), "ı": (r"\imath", "ord"),
    "ȷ": (r"\jmath", "ord"), "⊤": (r"\top", "ord"), "⊺": (r"\top", "ord"), "°": (r"^{\circ}", "ord"),
    "∎": (r"\blacksquare", "ord"), "■": (r"\blacksquare", "ord"), "✓": (r"\checkmark", "ord"),
    "§": (r"\S", "ord"), "¶": (r"\P", "ord"),
    # delimiters
    "⟨": (r"\langle", "open"), "〈": (r"\langle", "open"), "⟩": (r"\rangle", "close"), "〉": (r"\rangle", "close"),
    "⌊": (r"\lfloor", "open"), "⌋": (r"\rfloor", "close"), "⌈": (r"\lceil", "open"), "⌉": (r"\rceil", "close"),
    "‖": (r"\|", "fence"), "∥": (r"\|", "fence"), "⟦": (r"[\![", "open"), "⟧": (r"]\!]", "close"),
    # big operators
    "∑": (r"\sum", "bigop"), "∏": (r"\prod", "bigop"), "∐": (r"\coprod", "bigop"), "∫": (r"\int", "bigop"),
    "∬": (r"\iint", "bigop"), "∭": (r"\iiint", "bigop"), "∮": (r"\oint", "bigop"), "⋃": (r"\bigcup", "bigop"),
    "⋂": (r"\bigcap", "bigop"), "⨁": (r"\bigoplus", "bigop"), "⨂": (r"\bigotimes", "bigop"),
    "⨀": (r"\bigodot", "bigop"), "⋀": (r"\bigwedge", "bigop"), "⋁": (r"\bigvee", "bigop"),
    "⨄": (r"\biguplus", "bigop"), "⨆": (r"\bigsqcup", "bigop"),
    # accents (spacing and combining forms)
    "ˆ": (r"\hat", "accent"), "̂": (r"\hat", "accent"), "˜": (r"\tilde", "accent"), "̃": (r"\tilde", "accent"),
    "¯": (r"\bar", "accent"), "ˉ": (r"\bar", "accent"), "̄": (r"\bar", "accent"), "˙": (r"\dot", "accent"),
    "̇": (r"\dot", "accent"), "¨": (r"\ddot", "accent"), "̈": (r"\ddot", "accent"), "˘": (r"\breve", "accent"),
    "ˇ": (r"\check", "accent"), "´": (r"\acute", "accent"), "`": (r"\grave", "accent"),
    "⃗": (r"\vec", "accent"), "⃑": (r"\vec", "accent"),
    # radical
    "√": (r"\sqrt", "radical"),
}

# Functions TeX sets upright with their own commands; other upright words become \mathrm{...}.
TEX_FUNCTION_NAMES = frozenset({
    "log", "ln", "lg", "exp", "sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth",
    "arcsin", "arccos", "arctan", "max", "min", "sup", "inf", "lim", "limsup", "liminf", "arg", "det",
    "dim", "ker", "deg", "gcd", "hom", "Pr",
})
