#!/usr/bin/env python3
"""Reconcile a client's bank statement against the firm's ledger and invoice list.

Reads statements/bank.csv, statements/ledger.csv and statements/invoices.csv
and writes output/report.md (for people) and output/discrepancies.json (for
machines). Standard library only: it runs inside the sandbox with the host's
python3.

Checks, in order:
  1. the bank statement's running balance is continuous;
  2. the same charge appearing twice in the bank (same date, description,
     amount and reference) is a duplicate charge;
  3. every bank line has a ledger entry with the same reference and amount
     (missing entry, or amount mismatch), and every ledger entry a bank line;
  4. every invoice marked paid has a bank receipt for its amount, and no open
     invoice has one.

Usage: python3 reconcile.py [--statements DIR] [--output DIR]
"""

import argparse
import csv
import json
import os
import sys
from collections import Counter, OrderedDict
from decimal import Decimal, InvalidOperation

CENT = Decimal("0.01")


def money(text, where):
    try:
        return Decimal(text).quantize(CENT)
    except (InvalidOperation, TypeError):
        raise SystemExit("reconcile: %s: %r is not an amount" % (where, text))


def read_csv(path, columns):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise SystemExit("reconcile: %s: missing columns %s" % (path, ", ".join(missing)))
            return [dict(row, _line=i + 2) for i, row in enumerate(reader)]
    except OSError as e:
        raise SystemExit("reconcile: cannot read %s: %s" % (path, e.strerror))


def fmt(d):
    return "{:,.2f}".format(d)


def num(d):
    """A Decimal as a JSON number with two decimals' precision."""
    return float(d) if d is not None else None


def reconcile(statements):
    bank = read_csv(os.path.join(statements, "bank.csv"), ["date", "description", "amount", "balance", "reference"])
    ledger = read_csv(os.path.join(statements, "ledger.csv"), ["date", "entry_id", "account", "description", "amount", "reference"])
    invoices = read_csv(os.path.join(statements, "invoices.csv"), ["number", "client", "date", "amount", "status"])
    for r in bank:
        r["amount"] = money(r["amount"], "bank.csv line %d" % r["_line"])
        r["balance"] = money(r["balance"], "bank.csv line %d" % r["_line"])
    for e in ledger:
        e["amount"] = money(e["amount"], "ledger.csv line %d" % e["_line"])
    for inv in invoices:
        inv["amount"] = money(inv["amount"], "invoices.csv line %d" % inv["_line"])

    found = []

    def add(kind, reference, explanation, **fields):
        d = OrderedDict(id="D%d" % (len(found) + 1), type=kind, reference=reference)
        d.update(fields)
        d["explanation"] = explanation
        found.append(d)

    # 1. Running balance.
    if not bank:
        raise SystemExit("reconcile: bank.csv has no transactions")
    opening = bank[0]["balance"] - bank[0]["amount"]
    running = opening
    for r in bank:
        running += r["amount"]
        if running != r["balance"]:
            add("balance_break", r["reference"],
                "bank.csv line %d: the balance %s does not follow from the previous balance and the amount %s (expected %s)"
                % (r["_line"], fmt(r["balance"]), fmt(r["amount"]), fmt(running)),
                date=r["date"], bank_amount=num(r["amount"]), ledger_amount=None, difference=num(r["balance"] - running))
            running = r["balance"]

    # 2. Duplicate charges: keep the first line, flag the rest.
    seen = Counter()
    unique = []
    for r in bank:
        key = (r["date"], r["description"], r["amount"], r["reference"])
        seen[key] += 1
        if seen[key] > 1:
            add("duplicate_bank_charge", r["reference"],
                "%s %s on %s appears %d times in the bank statement (line %d repeats it) but was bought once; "
                "the extra charge of %s should be disputed with the bank or card issuer"
                % (r["description"], fmt(r["amount"]), r["date"], seen[key], r["_line"], fmt(-r["amount"])),
                date=r["date"], description=r["description"], bank_amount=num(r["amount"]),
                ledger_amount=None, difference=num(r["amount"]))
        else:
            unique.append(r)

    # 3. Bank against ledger, by reference.
    by_ref = {}
    for e in ledger:
        by_ref.setdefault(e["reference"], []).append(e)
    matched = 0
    used = set()
    for r in unique:
        entries = by_ref.get(r["reference"], [])
        if not entries:
            add("missing_ledger_entry", r["reference"],
                "%s %s on %s left the bank account but there is no ledger entry with reference %s; "
                "the expense is unrecorded" % (r["description"], fmt(r["amount"]), r["date"], r["reference"]),
                date=r["date"], description=r["description"], bank_amount=num(r["amount"]),
                ledger_amount=None, difference=num(r["amount"]))
            continue
        e = entries[0]
        used.add(id(e))
        if e["amount"] != r["amount"]:
            add("amount_mismatch", r["reference"],
                "the bank shows %s for %s on %s but ledger entry %s records %s (difference %s%s)"
                % (fmt(r["amount"]), r["description"], r["date"], e["entry_id"], fmt(e["amount"]),
                   fmt(r["amount"] - e["amount"]), transposition_note(r["amount"], e["amount"])),
                date=r["date"], description=r["description"], entry_id=e["entry_id"],
                bank_amount=num(r["amount"]), ledger_amount=num(e["amount"]), difference=num(r["amount"] - e["amount"]))
        else:
            matched += 1
    for e in ledger:
        if id(e) not in used:
            add("ledger_entry_without_bank", e["reference"],
                "ledger entry %s (%s %s on %s) has no bank transaction with reference %s"
                % (e["entry_id"], e["description"], fmt(e["amount"]), e["date"], e["reference"]),
                date=e["date"], entry_id=e["entry_id"], bank_amount=None, ledger_amount=num(e["amount"]),
                difference=num(-e["amount"]))

    # 4. Invoices against bank receipts.
    receipts = {}
    for r in unique:
        if r["amount"] > 0:
            receipts.setdefault(r["reference"], []).append(r)
    paid_ok = 0
    for inv in invoices:
        got = receipts.get(inv["number"], [])
        status = inv["status"].strip().lower()
        if status == "paid":
            if not got:
                add("invoice_marked_paid_unpaid", inv["number"],
                    "invoice %s to %s for %s (issued %s) is marked paid, but no bank receipt references it; "
                    "the %s is still owed" % (inv["number"], inv["client"], fmt(inv["amount"]), inv["date"], fmt(inv["amount"])),
                    date=inv["date"], client=inv["client"], bank_amount=None, ledger_amount=None,
                    invoice_amount=num(inv["amount"]), difference=num(-inv["amount"]))
            elif sum(r["amount"] for r in got) != inv["amount"]:
                paid = sum(r["amount"] for r in got)
                add("invoice_paid_wrong_amount", inv["number"],
                    "invoice %s to %s is for %s but the bank received %s"
                    % (inv["number"], inv["client"], fmt(inv["amount"]), fmt(paid)),
                    date=inv["date"], client=inv["client"], bank_amount=num(paid), ledger_amount=None,
                    invoice_amount=num(inv["amount"]), difference=num(paid - inv["amount"]))
            else:
                paid_ok += 1
        elif got:
            add("open_invoice_has_payment", inv["number"],
                "invoice %s to %s is marked %s but the bank received %s for it"
                % (inv["number"], inv["client"], status, fmt(sum(r["amount"] for r in got))),
                date=inv["date"], client=inv["client"], bank_amount=num(sum(r["amount"] for r in got)),
                ledger_amount=None, invoice_amount=num(inv["amount"]), difference=None)

    credits = sum((r["amount"] for r in bank if r["amount"] > 0), Decimal(0))
    debits = sum((r["amount"] for r in bank if r["amount"] < 0), Decimal(0))
    summary = OrderedDict(
        period_from=min(r["date"] for r in bank),
        period_to=max(r["date"] for r in bank),
        bank_transactions=len(bank),
        ledger_entries=len(ledger),
        invoices=len(invoices),
        invoices_paid_and_received=paid_ok,
        invoices_open=sum(1 for i in invoices if i["status"].strip().lower() != "paid"),
        matched=matched,
        discrepancies=len(found),
        opening_balance=num(opening),
        closing_balance=num(bank[-1]["balance"]),
        bank_credits=num(credits),
        bank_debits=num(debits),
        ledger_total=num(sum((e["amount"] for e in ledger), Decimal(0))),
        bank_total=num(credits + debits),
    )
    return summary, found


def transposition_note(a, b):
    sa, sb = str(abs(a)).replace(".", ""), str(abs(b)).replace(".", "")
    if len(sa) == len(sb) and sorted(sa) == sorted(sb) and sum(x != y for x, y in zip(sa, sb)) == 2:
        return ", which looks like two transposed digits"
    return ""


LABELS = {
    "missing_ledger_entry": "Missing ledger entry",
    "amount_mismatch": "Amount mismatch",
    "duplicate_bank_charge": "Duplicate bank charge",
    "invoice_marked_paid_unpaid": "Invoice marked paid but unpaid",
    "invoice_paid_wrong_amount": "Invoice paid with the wrong amount",
    "open_invoice_has_payment": "Open invoice already paid",
    "ledger_entry_without_bank": "Ledger entry without bank transaction",
    "balance_break": "Bank balance break",
}


def report(summary, found):
    s = summary
    lines = [
        "# Reconciliation report",
        "",
        "Period: %s to %s" % (s["period_from"], s["period_to"]),
        "",
        "## Totals",
        "",
        "| | |",
        "|---|---:|",
        "| Opening balance | %s |" % fmt(Decimal(str(s["opening_balance"]))),
        "| Bank credits | %s |" % fmt(Decimal(str(s["bank_credits"]))),
        "| Bank debits | %s |" % fmt(Decimal(str(s["bank_debits"]))),
        "| Closing balance | %s |" % fmt(Decimal(str(s["closing_balance"]))),
        "| Net movement per bank | %s |" % fmt(Decimal(str(s["bank_total"]))),
        "| Net movement per ledger | %s |" % fmt(Decimal(str(s["ledger_total"]))),
        "| Unexplained difference (bank - ledger) | %s |" % fmt(Decimal(str(s["bank_total"])) - Decimal(str(s["ledger_total"]))),
        "",
        "## Matching",
        "",
        "- Bank transactions: %d" % s["bank_transactions"],
        "- Ledger entries: %d" % s["ledger_entries"],
        "- Matched bank to ledger (same reference and amount): %d" % s["matched"],
        "- Invoices: %d (%d paid and received, %d open)" % (s["invoices"], s["invoices_paid_and_received"], s["invoices_open"]),
        "- Discrepancies: %d" % s["discrepancies"],
        "",
        "## Discrepancies",
        "",
    ]
    if not found:
        lines.append("None: the bank statement, the ledger and the invoice list agree.")
    for d in found:
        lines.append("### %s. %s (%s)" % (d["id"], LABELS.get(d["type"], d["type"]), d["reference"]))
        lines.append("")
        lines.append(d["explanation"][0].upper() + d["explanation"][1:] + ".")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--statements", default="statements", help="directory with bank.csv, ledger.csv, invoices.csv")
    ap.add_argument("--output", default="output", help="directory to write report.md and discrepancies.json into")
    args = ap.parse_args(argv)
    summary, found = reconcile(args.statements)
    os.makedirs(args.output, exist_ok=True)
    with open(os.path.join(args.output, "report.md"), "w", encoding="utf-8") as f:
        f.write(report(summary, found))
    with open(os.path.join(args.output, "discrepancies.json"), "w", encoding="utf-8") as f:
        json.dump(OrderedDict(summary=summary, discrepancies=found), f, indent=2)
        f.write("\n")
    print("reconciled %d bank transactions against %d ledger entries and %d invoices: %d matched, %d discrepancies"
          % (summary["bank_transactions"], summary["ledger_entries"], summary["invoices"], summary["matched"], len(found)))
    for d in found:
        print("  %s %s %s" % (d["id"], d["type"], d["reference"]))
    print("wrote %s and %s" % (os.path.join(args.output, "report.md"), os.path.join(args.output, "discrepancies.json")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
