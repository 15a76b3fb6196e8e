package ringflow

import "context"

// setAttempt gives every operator instance of p the context of the attempt
// (operator.Context.Attempt), and every task a hook that cancels it when
// the task fails, so that user code blocked in another task returns.
func (p *physical) setAttempt(ctx context.Context, cancel context.CancelCauseFunc) {
	for _, t := range p.tasks {
		t.Ctx.Attempt = ctx
		for _, c := range t.Ctxs {
			c.Attempt = ctx
		}
		t.OnFail = cancel
	}
}
