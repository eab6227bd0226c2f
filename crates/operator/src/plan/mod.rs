//! The planner: one observed state in, exactly one next step out. No I/O, no clock.
