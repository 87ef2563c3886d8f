/**
 * Background work only the primary does (removing silent Pending nodes, refreshing token
 * issuers' keys). Each task is started when this node becomes primary (in a state that
 * allows primary tasks) and stopped when it stops being primary or the node stops, so a task never
 * runs on a backup and never survives its primacy.
 */
export interface PrimaryTask {
  readonly name: string;
  start(): void;
  stop(): void;
}

export class PrimaryTasks {
  private readonly tasks: PrimaryTask[] = [];
  private running = false;

  register(task: PrimaryTask): void {
    this.tasks.push(task);
    if (this.running) task.start();
  }

  /** Starts every task when `primary` (and allowed), stops them otherwise; idempotent. */
  update(primary: boolean): void {
    if (primary === this.running) return;
    this.running = primary;
    for (const task of this.tasks) {
      if (primary) task.start();
      else task.stop();
    }
  }
}
