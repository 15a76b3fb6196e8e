package debloat

// The controller's parameters, in one table, each with its reason. None is
// a time or a size: the period is a share of Config.Target, the others are
// shares, so the controller behaves the same on any host and for any
// target. The package doc tells how each rule uses them; the golden
// scenarios in testdata put each on both sides of its edge.
const (
	// periodsPerTarget is how many times per target the controller
	// measures the drain rate and moves the limits. The data in flight
	// takes about a target to drain, so the limits should follow the rate
	// faster than that; more often than this and a period holds too few
	// frames for its rate to mean much.
	periodsPerTarget = 4

	// alpha is the weight of a period's measured rate in the smoothed one:
	// rate += alpha·(measured − rate). With one measurement a period, a
	// step in the drain rate is 68% followed after one target, 90% after
	// two and 97% after three ((1−alpha)^periodsPerTarget ≈ 0.32 of it is
	// left per target), and a single period's burst moves the rate by
	// alpha of its jump.
	alpha = 1.0 / periodsPerTarget

	// minBusyShare is the least share of a period the consumer must have
	// been busy for the period to be measured. A consumer busy less than
	// that is much faster than its input: its ring is nearly empty
	// whatever the limit, and the few frames it drained say little about
	// how fast it drains a full one. Keeping the rates then means an idle
	// consumer does not shrink its rings, and a consumer faster than its
	// producer keeps a large limit, so it is never starved when the
	// producer speeds up.
	minBusyShare = 1.0 / periodsPerTarget

	// threshold is the least relative change that moves a limit (as
	// Flink's buffer-debloat.threshold-percentages, 25): a limit that would
	// move less stays where it is, so the word the producer caches is
	// rarely written and the producer's cached line stays quiet. Min and
	// Max are reached whatever the change.
	threshold = 0.25
)
