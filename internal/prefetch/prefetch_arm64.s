#include "textflag.h"

// func spans(p *unsafe.Pointer, n int, last uintptr)
TEXT ·spans(SB), NOSPLIT, $0-24
	MOVD p+0(FP), R0
	MOVD n+8(FP), R1
	MOVD last+16(FP), R2
loop:
	MOVD.P 8(R0), R3
	PRFM (R3), PLDL1KEEP
	ADD R2, R3, R4
	PRFM (R4), PLDL1KEEP
	SUBS $1, R1, R1
	BNE loop
	RET

// func forWrite(p unsafe.Pointer, lines int)
TEXT ·forWrite(SB), NOSPLIT, $0-16
	MOVD p+0(FP), R0
	MOVD lines+8(FP), R1
wloop:
	PRFM (R0), PSTL1KEEP
	ADD $64, R0, R0
	SUBS $1, R1, R1
	BNE wloop
	RET
