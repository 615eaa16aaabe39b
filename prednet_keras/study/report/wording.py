"""The report in words: how numbers and p-values are printed, the one-sentence answer, a verdict's line.

Report dicts in, text out; markdown.py puts the text into report.md,
the command prints the answer.
"""

import math

__all__ = ["answer", "determinism_cell", "interval", "number", "p_value", "signed", "verdict_line"]


def number(value, digits=4):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return f"{value:.{digits}g}"
    return str(value)


def p_value(value):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def interval(ci, digits=4):
    return f"[{number(ci[0], digits)}, {number(ci[1], digits)}]"


def signed(value):
    return number(value) if not isinstance(value, float) or not math.isfinite(value) or value < 0 else "+" + number(value)


def _pairs_text(pairs, differences=False):
    if differences:
        return ", ".join(f"{p['a']} vs {p['b']} by {signed(p['primary']['difference'])}" for p in pairs)
    return ", ".join(f"{p['a']} vs {p['b']}" for p in pairs)


def answer(section):
    """One sentence: what the verdicts of a protocol's pairs say together.

    Args:
        section: one protocol of a report dict.
    """
    pairs = section["comparisons"]["pairs"]
    metric = section["metric"]["name"]
    configs = section["configurations"]
    if not pairs:
        return (f"Only one configuration ({configs[0]['id']}) ran this protocol: nothing to compare." if configs
                else "No usable runs: nothing to compare.")
    margin = number(section["comparisons"]["margin"])
    kinds = {kind: [p for p in pairs if p["verdict_kind"] in kinds_of]
             for kind, kinds_of in (("differ", ("difference",)), ("same", ("identical", "equivalent")),
                                    ("open", ("inconclusive",)))}
    listed = 4  # pairs named in the sentence; more are counted
    if all(p["verdict_kind"] == "identical" for p in pairs):
        return (f"No configuration changed `{metric}`: {'the' if len(pairs) == 1 else 'all'} {len(pairs)} "
                f"pair{'s' if len(pairs) != 1 else ''} of configurations gave identical results for every seed.")
    if not kinds["differ"] and not kinds["open"]:
        largest = max(abs(p["primary"]["difference"]) for p in pairs)
        return (f"No configuration changed `{metric}` beyond the margin: {'the' if len(pairs) == 1 else 'all'} "
                f"{len(pairs)} pair{'s' if len(pairs) != 1 else ''} of configurations "
                f"{'is' if len(pairs) == 1 else 'are'} equivalent within +/- {margin} (the largest mean "
                f"difference is {number(largest, 2)}).")
    if len(kinds["open"]) == len(pairs):
        return f"The seeds are too few to decide any of the {len(pairs)} pairs of configurations{_needed(pairs)}."
    parts = []
    if kinds["differ"]:
        shown = kinds["differ"]
        names = f" ({_pairs_text(shown, differences=True)})" if len(shown) <= listed else " (see Verdicts)"
        parts.append(f"{len(shown)} of {len(pairs)} pairs of configurations differ in `{metric}`{names}")
    else:
        parts.append(f"No difference in `{metric}` is detected in {len(pairs)} pairs of configurations")
    if kinds["same"]:
        shown = kinds["same"]
        names = f" ({_pairs_text(shown)})" if len(shown) <= listed else ""
        parts.append(f"{len(shown)} {'is' if len(shown) == 1 else 'are'} equivalent within +/- {margin}{names}")
    if kinds["open"]:
        parts.append(f"{len(kinds['open'])} {'is' if len(kinds['open']) == 1 else 'are'} inconclusive"
                     f"{_needed(kinds['open'])}")
    return parts[0] + ("; " + " and ".join(parts[1:]) if parts[1:] else "") + "."


def _needed(pairs):
    """", up to about N seeds per configuration needed" for inconclusive pairs (or at least 2)."""
    if any(p["n_a"] < 2 or p["n_b"] < 2 for p in pairs):
        return " (at least 2 seeds per configuration needed)"
    needed = [p["power"]["seeds_needed"] for p in pairs if p["power"]["seeds_needed"] is not None]
    return f", up to about {max(needed)} seeds per configuration needed" if needed else ""


def determinism_cell(audit):
    """The Configurations table's determinism column for one audit (stats.determinism_audit)."""
    details = [f"{audit['identical']}/{audit['audited']} repeats identical"] if audit["audited"] else []
    spread = audit.get("max_metric_difference")
    if spread is not None and (spread > 0 or audit["status"] != "deterministic"):
        # Repeats can end with other weights and still the same metric to every recorded digit.
        details.append(f"metric differs by up to {number(spread, 2)}" if spread > 0 else "the metric itself equal")
    cell = audit["status"] + (f" ({'; '.join(details)})" if details else "")
    return f"**DEFECT**: {cell}" if audit["status"] == "defect" else cell


def verdict_line(pair, comparison):
    primary = pair["primary"]
    text = (f"- **{pair['a']} vs {pair['b']}: {pair['verdict']}** ({pair['a']} - {pair['b']} = "
            f"{number(primary['difference'])}, {int(100 * (1 - comparison['alpha']))}% CI {interval(primary['ci'])}, "
            f"{primary['test']}" + (f" on {pair['paired_seeds']} seeds" if pair["design"] == "paired" else "")
            + f", Holm p {p_value(pair['p_holm']['primary'])}")
    per_seed = pair.get("seed_differences")
    if per_seed and pair["verdict_kind"] != "identical":
        text += (f"; higher in {pair['a']} for {per_seed['a_higher']} of {per_seed['n']} seeds, in {pair['b']} "
                 f"for {per_seed['b_higher']}")
        if per_seed["beyond_margin"] is not None:
            text += f"; {per_seed['beyond_margin']} of {per_seed['n']} seeds differ by more than the margin"
        text += f"; largest difference of a seed {number(per_seed['largest'], 2)}"
    return text + (f"; {'; '.join(pair['notes'])}" if pair["notes"] else "") + ")"
