package nexmark

import (
	"fmt"
	"math"
	"math/big"
	"testing"
)

func TestAppendEuros(t *testing.T) {
	for _, c := range []struct {
		price int64
		want  string
	}{
		{0, "0.000"},
		{1, "0.908"},
		{100, "90.800"},
		{1001, "908.908"}, // float64 0.908*1001 prints 908.9079999999999
		{12345, "11209.260"},
		{100_000_000, "90800000.000"},
		{-5, "-4.540"},
		{math.MaxInt64, "8374821809464136432.756"},
		{math.MinInt64, "-8374821809464136433.664"},
	} {
		if got := string(AppendEuros(nil, c.price)); got != c.want {
			t.Errorf("AppendEuros(%d) = %s, want %s", c.price, got, c.want)
		}
	}
}

// TestAppendEurosBig checks AppendEuros against arbitrary precision.
func TestAppendEurosBig(t *testing.T) {
	for _, p := range []int64{0, 999, 1000, 1999, 123456789, 1e16, 1e17, -1e18, math.MaxInt64 - 1} {
		v := new(big.Int).Mul(big.NewInt(p), big.NewInt(908))
		sign := ""
		if v.Sign() < 0 {
			sign = "-"
			v.Neg(v)
		}
		q, r := new(big.Int).QuoRem(v, big.NewInt(1000), new(big.Int))
		want := fmt.Sprintf("%s%s.%03d", sign, q, r.Int64())
		if got := string(AppendEuros(nil, p)); got != want {
			t.Errorf("AppendEuros(%d) = %s, want %s", p, got, want)
		}
	}
}

func TestQueryRows(t *testing.T) {
	b := Bid{Auction: 1007, Bidder: 1001, Price: 1001, DateTime: 1436918400123}
	name := []byte("Peter Jones")
	for _, c := range []struct{ got, want string }{
		{string(AppendQ0Row(nil, &b)), "1007,1001,1001,1436918400123"},
		{string(AppendQ1Row(nil, &b)), "1007,1001,908.908,1436918400123"},
		{string(AppendQ2Row(nil, 1107, 55)), "1107,55"},
		{string(AppendQ3Row(nil, name, []byte("Los Angeles"), []byte("CA"), 1003)), "Peter Jones,Los Angeles,CA,1003"},
		{string(AppendQ3Row(nil, []byte(`a,"b"`), []byte("x\ny"), []byte("OR"), 1)), `"a,""b""","x` + "\n" + `y",OR,1`},
		{string(AppendQ5Row(nil, 1436918400000, 1000, 42)), "1436918400000,1000,42"},
		{string(AppendQ7Row(nil, 1436918400000, &b)), "1436918400000,1007,1001,1001,1436918400123"},
		{string(AppendQ8Row(nil, 1436918400000, 1000, name)), "1436918400000,1000,Peter Jones"},
		{string(AppendQ11Row(nil, 1001, 3, 1436918400000, 1436918412000)), "1001,3,1436918400000,1436918412000"},
	} {
		if c.got != c.want {
			t.Errorf("row %q, want %q", c.got, c.want)
		}
	}
}

func TestTextSet(t *testing.T) {
	var a, b Text16
	if err := a.Set("a long name here"); err != nil { // 16 bytes: one too many
		if err := a.Set("Walter Bartels"); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Fatal("Set of 16 bytes into Text16 succeeded")
	}
	b.Set("x long name, yes")
	b.Set("Walter Bartels")
	if a != b || a.String() != "Walter Bartels" {
		t.Fatalf("texts %q and %q not equal after the same Set", a.String(), b.String())
	}
}
