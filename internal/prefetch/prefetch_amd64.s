#include "textflag.h"

// func spans(p *unsafe.Pointer, n int, last uintptr)
TEXT ·spans(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ last+16(FP), DX
loop:
	MOVQ (SI), AX
	PREFETCHT0 (AX)
	PREFETCHT0 (AX)(DX*1)
	ADDQ $8, SI
	DECQ CX
	JNE loop
	RET
