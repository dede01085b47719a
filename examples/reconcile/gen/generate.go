package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"
)

// DefaultSeed is the seed of the committed statements.
const DefaultSeed = 42

// PlantedFile is the key Files uses for the answer key.
const PlantedFile = "planted.json"

// Cents is an amount in pence: exact arithmetic, formatted with two decimals.
type Cents int64

func (c Cents) String() string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

// BankRow is one bank statement line; Amount is signed (credits positive).
type BankRow struct {
	Date        time.Time
	Description string
	Amount      Cents
	Balance     Cents
	Reference   string
}

// LedgerEntry is one of the firm's ledger lines for the client's account.
type LedgerEntry struct {
	Date        time.Time
	EntryID     string
	Account     string
	Description string
	Amount      Cents
	Reference   string
}

// Invoice is one invoice the client issued.
type Invoice struct {
	Number string
	Client string
	Date   time.Time
	Amount Cents
	Status string // paid or open
}

// Planted is a discrepancy put in on purpose: the answer key.
type Planted struct {
	Type      string `json:"type"`
	Reference string `json:"reference"`
	Detail    string `json:"detail"`
}

// Statements is one generated quarter.
type Statements struct {
	Opening  Cents
	Bank     []BankRow
	Ledger   []LedgerEntry
	Invoices []Invoice
	Planted  []Planted
}

var (
	periodStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	periodDays  = 90 // 1 January to 31 March 2026
)

var customers = []string{
	"Northwind Traders", "Blue Heron Cafe", "Kestrel Logistics", "Maple & Oak Interiors",
	"Solstice Dental", "Ironbridge Cycles", "Quayside Books", "Tern Analytics",
}

// vendor is a kind of spending that recurs with amounts in a range.
type vendor struct {
	desc     string
	account  string
	min, max Cents
}

var cardSpend = []vendor{
	{"CARD 4921 AWS EMEA", "6500 Software & hosting", 4_000, 38_000},
	{"CARD 4921 PRET A MANGER", "6800 Staff welfare", 450, 2_800},
	{"CARD 4921 TRAINLINE", "6600 Travel", 1_800, 16_500},
	{"CARD 4921 UBER *TRIP", "6600 Travel", 900, 4_600},
	{"CARD 4921 STAPLES UK", "6700 Office supplies", 1_200, 14_000},
	{"CARD 4921 FIGMA", "6500 Software & hosting", 1_200, 5_400},
	{"CARD 4921 ROYAL MAIL", "6700 Office supplies", 250, 3_900},
	{"CARD 4921 SCREWFIX", "6900 Repairs", 700, 9_800},
	{"CARD 4921 PREMIER INN", "6600 Travel", 6_500, 14_900},
	{"CARD 4921 AMAZON MKTPLC", "6700 Office supplies", 600, 12_000},
}

type monthly struct {
	day     int
	desc    string
	account string
	amount  Cents
}

var fixedMonthly = []monthly{
	{1, "STANDING ORDER HARBOUR WORKS RENT UNIT 4", "6100 Rent", -320_000},
	{3, "DIRECT DEBIT BRITISH GAS BUSINESS", "6200 Utilities", -18_640},
	{5, "DIRECT DEBIT BT BUSINESS BROADBAND", "6200 Utilities", -5_400},
	{8, "CARD 4921 ADOBE CREATIVE CLOUD", "6500 Software & hosting", -6_299},
	{12, "DIRECT DEBIT HISCOX INSURANCE", "6300 Insurance", -9_875},
	{25, "BACS PAYROLL", "7000 Salaries", -1_486_250},
	{28, "MONTHLY ACCOUNT FEE", "7900 Bank charges", -1_250},
}

type builder struct {
	r   *rand.Rand
	s   *Statements
	bal Cents
	trx int
	je  int
}

func (b *builder) amount(min, max Cents) Cents { return min + Cents(b.r.Int64N(int64(max-min+1))) }

func (b *builder) ref() string {
	b.trx++
	return fmt.Sprintf("TRX%06d", 104_000+b.trx)
}

// bank appends a bank row and its ledger entry (posted 0-2 days later).
func (b *builder) bank(day time.Time, desc, account string, amt Cents, ref string) {
	b.bal += amt
	b.s.Bank = append(b.s.Bank, BankRow{Date: day, Description: desc, Amount: amt, Balance: b.bal, Reference: ref})
	b.je++
	lag := time.Duration(b.r.IntN(3)) * 24 * time.Hour
	if day.Add(lag).After(periodStart.AddDate(0, 0, periodDays-1)) {
		lag = 0
	}
	b.s.Ledger = append(b.s.Ledger, LedgerEntry{
		Date: day.Add(lag), EntryID: fmt.Sprintf("JE-%05d", 20_000+b.je), Account: account,
		Description: ledgerDesc(desc), Amount: amt, Reference: ref,
	})
}

// ledgerDesc is how a bookkeeper would word the bank text.
func ledgerDesc(bank string) string {
	switch {
	case len(bank) > 9 && bank[:9] == "CARD 4921":
		return "Card purchase: " + bank[10:]
	case len(bank) > 13 && bank[:13] == "DIRECT DEBIT ":
		return "Direct debit: " + bank[13:]
	}
	return bank
}

// Generate builds a quarter of statements from seed.
func Generate(seed uint64) *Statements {
	b := &builder{r: rand.New(rand.NewPCG(seed, seed^0x5eed_ca5e)), s: &Statements{}}
	b.s.Opening = 4_825_000
	b.bal = b.s.Opening

	// Invoices: some issued in December and paid in January, the rest
	// through the quarter; late ones stay open.
	type receipt struct {
		day time.Time
		inv int
	}
	var receipts []receipt
	for i := 0; i < 36; i++ {
		issued := periodStart.AddDate(0, 0, -25+i*3+b.r.IntN(3))
		inv := Invoice{
			Number: fmt.Sprintf("INV-2026-%03d", 101+i),
			Client: customers[b.r.IntN(len(customers))],
			Date:   issued,
			Amount: b.amount(45_000, 680_000) / 500 * 500, // round to 5.00
			Status: "paid",
		}
		paid := issued.AddDate(0, 0, 14+b.r.IntN(21))
		if paid.Before(periodStart) {
			// Paid before the quarter: the bank statement would not show
			// it, so let it arrive in the first days of January instead.
			paid = periodStart.AddDate(0, 0, 1+b.r.IntN(5))
		}
		if paid.After(periodStart.AddDate(0, 0, periodDays-1)) {
			inv.Status = "open"
		} else {
			receipts = append(receipts, receipt{paid, i})
		}
		b.s.Invoices = append(b.s.Invoices, inv)
	}

	// Planted: an invoice marked paid whose money never arrived.
	unpaid := receipts[len(receipts)/2].inv
	receipts = append(receipts[:len(receipts)/2], receipts[len(receipts)/2+1:]...)
	b.s.Planted = append(b.s.Planted, Planted{Type: "invoice_marked_paid_unpaid", Reference: b.s.Invoices[unpaid].Number,
		Detail: "invoice is marked paid but no payment reached the bank"})

	// The planted card and supplier discrepancies go on the first weekday
	// at or after these days of the quarter.
	mismatchDay, missingDay, dupDay := 40, 52, 71
	var mismatchDone, missingDone, dupDone bool
	for d := 0; d < periodDays; d++ {
		day := periodStart.AddDate(0, 0, d)
		for _, m := range fixedMonthly {
			if day.Day() == m.day {
				b.bank(day, m.desc, m.account, m.amount, b.ref())
			}
		}
		for _, rc := range receipts {
			if rc.day.Equal(day) {
				inv := b.s.Invoices[rc.inv]
				b.bank(day, "FASTER PAYMENT FROM "+upper(inv.Client)+" "+inv.Number, "1100 Trade debtors", inv.Amount, inv.Number)
			}
		}
		if day.Weekday() == time.Saturday || day.Weekday() == time.Sunday {
			continue
		}
		n := 2 + b.r.IntN(2)
		for k := 0; k < n; k++ {
			v := cardSpend[b.r.IntN(len(cardSpend))]
			amt := -b.amount(v.min, v.max)
			ref := b.ref()
			b.bank(day, v.desc, v.account, amt, ref)
			switch {
			case d >= missingDay && !missingDone:
				missingDone = true
				// Planted: the bank paid it, the ledger never recorded it.
				b.s.Ledger = b.s.Ledger[:len(b.s.Ledger)-1]
				b.s.Planted = append(b.s.Planted, Planted{Type: "missing_ledger_entry", Reference: ref,
					Detail: fmt.Sprintf("%s %s on %s has no ledger entry", v.desc, amt, day.Format(time.DateOnly))})
			case d >= dupDay && !dupDone:
				dupDone = true
				// Planted: the card processor charged the same purchase twice.
				b.bal += amt
				b.s.Bank = append(b.s.Bank, BankRow{Date: day, Description: v.desc, Amount: amt, Balance: b.bal, Reference: ref})
				b.s.Planted = append(b.s.Planted, Planted{Type: "duplicate_bank_charge", Reference: ref,
					Detail: fmt.Sprintf("%s %s charged twice on %s", v.desc, amt, day.Format(time.DateOnly))})
			}
		}
		if d >= mismatchDay && !mismatchDone {
			mismatchDone = true
			// Planted: a supplier payment keyed into the ledger with two
			// digits swapped.
			amt := Cents(-124_550)
			ref := b.ref()
			b.bank(day, "FASTER PAYMENT TO PIXEL PRINT LTD", "5000 Cost of sales", amt, ref)
			b.s.Ledger[len(b.s.Ledger)-1].Amount = -125_450
			b.s.Planted = append(b.s.Planted, Planted{Type: "amount_mismatch", Reference: ref,
				Detail: "bank -1245.50, ledger -1254.50 (digits transposed)"})
		}
		if d%30 == 29 {
			b.bank(day, "INTEREST PAID", "4900 Interest received", b.amount(300, 1_900), b.ref())
		}
	}
	sort.SliceStable(b.s.Ledger, func(i, j int) bool { return b.s.Ledger[i].Date.Before(b.s.Ledger[j].Date) })
	sort.Slice(b.s.Planted, func(i, j int) bool { return b.s.Planted[i].Type < b.s.Planted[j].Type })
	return b.s
}

func upper(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c >= 'a' && c <= 'z' {
			out[i] = c - 32
		}
	}
	return string(out)
}

// Files renders the statements as CSV (and the answer key as JSON).
func (s *Statements) Files() (map[string][]byte, error) {
	files := map[string][]byte{}
	var err error
	rows := [][]string{{"date", "description", "amount", "balance", "reference"}}
	for _, r := range s.Bank {
		rows = append(rows, []string{r.Date.Format(time.DateOnly), r.Description, r.Amount.String(), r.Balance.String(), r.Reference})
	}
	if files["bank.csv"], err = csvBytes(rows); err != nil {
		return nil, err
	}
	rows = [][]string{{"date", "entry_id", "account", "description", "amount", "reference"}}
	for _, e := range s.Ledger {
		rows = append(rows, []string{e.Date.Format(time.DateOnly), e.EntryID, e.Account, e.Description, e.Amount.String(), e.Reference})
	}
	if files["ledger.csv"], err = csvBytes(rows); err != nil {
		return nil, err
	}
	rows = [][]string{{"number", "client", "date", "amount", "status"}}
	for _, inv := range s.Invoices {
		rows = append(rows, []string{inv.Number, inv.Client, inv.Date.Format(time.DateOnly), inv.Amount.String(), inv.Status})
	}
	if files["invoices.csv"], err = csvBytes(rows); err != nil {
		return nil, err
	}
	key, err := json.MarshalIndent(map[string]any{"opening_balance": s.Opening.String(), "discrepancies": s.Planted}, "", "  ")
	if err != nil {
		return nil, err
	}
	files[PlantedFile] = append(key, '\n')
	return files, nil
}

func csvBytes(rows [][]string) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.WriteAll(rows); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
