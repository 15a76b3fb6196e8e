package nexmark

import "strconv"

// CSV rows of the queries' --output files: one row per result, no header,
// times in epoch milliseconds, no trailing newline (the caller adds it).
// Text fields are quoted as RFC 4180 says only when they contain a comma, a
// double quote or a line break; generated names and cities never do.
//
//	q0   auction,bidder,price,date_time
//	q1   auction,bidder,price_eur,date_time
//	q2   auction,price
//	q3   name,city,state,auction_id
//	q5   window_start,auction,num
//	q7   window_start,auction,bidder,price,date_time
//	q8   window_start,person_id,name
//	q11  bidder,bid_count,session_start,session_end

// AppendQ0Row appends q0's row for a bid.
func AppendQ0Row(dst []byte, b *Bid) []byte {
	return appendInts(dst, b.Auction, b.Bidder, b.Price, b.DateTime)
}

// AppendQ1Row appends q1's row for a bid: the price converted to euros.
func AppendQ1Row(dst []byte, b *Bid) []byte {
	dst = appendInts(dst, b.Auction, b.Bidder)
	dst = append(dst, ',')
	dst = AppendEuros(dst, b.Price)
	dst = append(dst, ',')
	return strconv.AppendInt(dst, b.DateTime, 10)
}

// AppendEuros appends 0.908 * price with exactly three decimals, as Flink's
// DECIMAL(23, 3) prints it. 0.908 * price is price*908 thousandths exactly,
// so integer arithmetic gives the exact value, where float64 would print
// e.g. 0.908*1001 as 908.9079999999999. Splitting price into thousands and
// a remainder keeps every int64 price exact (no overflow).
func AppendEuros(dst []byte, price int64) []byte {
	m := uint64(price)
	if price < 0 {
		dst = append(dst, '-')
		m = -m // NB: correct for MinInt64 too, in uint64
	}
	q, r := m/1000, m%1000 // 0.908*m = q*908 + r*908/1000
	dst = strconv.AppendUint(dst, q*908+r*908/1000, 10)
	frac := r * 908 % 1000
	return append(dst, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// AppendQ2Row appends q2's row.
func AppendQ2Row(dst []byte, auction, price int64) []byte {
	return appendInts(dst, auction, price)
}

// AppendQ3Row appends q3's row: the seller's name, city and state and the
// auction's id.
func AppendQ3Row(dst []byte, name, city, state []byte, auctionID int64) []byte {
	dst = AppendCSVField(dst, name)
	dst = append(dst, ',')
	dst = AppendCSVField(dst, city)
	dst = append(dst, ',')
	dst = AppendCSVField(dst, state)
	dst = append(dst, ',')
	return strconv.AppendInt(dst, auctionID, 10)
}

// AppendQ5Row appends q5's row: a window, a hot auction and its bid count.
func AppendQ5Row(dst []byte, windowStart, auction, num int64) []byte {
	return appendInts(dst, windowStart, auction, num)
}

// AppendQ7Row appends q7's row: a window and one of its highest bids.
func AppendQ7Row(dst []byte, windowStart int64, b *Bid) []byte {
	return appendInts(dst, windowStart, b.Auction, b.Bidder, b.Price, b.DateTime)
}

// AppendQ8Row appends q8's row: a window and a new person who opened an
// auction in it.
func AppendQ8Row(dst []byte, windowStart, personID int64, name []byte) []byte {
	dst = appendInts(dst, windowStart, personID)
	dst = append(dst, ',')
	return AppendCSVField(dst, name)
}

// AppendQ11Row appends q11's row: one bidder session.
func AppendQ11Row(dst []byte, bidder, bidCount, sessionStart, sessionEnd int64) []byte {
	return appendInts(dst, bidder, bidCount, sessionStart, sessionEnd)
}

// AppendCSVField appends s as one CSV field, quoted (with inner quotes
// doubled) only if it contains a comma, a double quote, CR or LF.
func AppendCSVField(dst, s []byte) []byte {
	quote := false
	for _, c := range s {
		if c == ',' || c == '"' || c == '\n' || c == '\r' {
			quote = true
			break
		}
	}
	if !quote {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	for _, c := range s {
		if c == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, c)
	}
	return append(dst, '"')
}

func appendInts(dst []byte, vs ...int64) []byte {
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, v, 10)
	}
	return dst
}
