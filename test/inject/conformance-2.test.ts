// Half of the orch-inject conformance cases (see conformance.ts).
import { runConformance } from './conformance';

runConformance(1, 2);
