#include "textflag.h"

// func spans(p *unsafe.Pointer, n int, last uintptr)
//
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

// func forWrite(p unsafe.Pointer, lines int)
TEXT ·forWrite(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ lines+8(FP), CX
wloop:
	// PREFETCHW (SI), which the Go assembler does not know: 0F 0D /1.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x0E
	ADDQ $64, SI
	DECQ CX
	JNE wloop
	RET
