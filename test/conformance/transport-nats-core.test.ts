/** The Transport conformance suite against core NATS (memory mode over a real nats-server). */
import { natsCoreFactory } from './transport-nats-harness.js';
import { transportConformance } from './transport.js';

transportConformance('NATS core', natsCoreFactory());
