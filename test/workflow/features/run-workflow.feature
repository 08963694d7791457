Feature: Run Workflow
  As a convoke workflow author
  I want a task to run another workflow pinned beside mine as a child instance
  So that a process is composed of smaller ones, each its own event-sourced instance

  Scenario: Child Output Is The Task Output
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: order
      version: '1.0.0'
    do:
      - price:
          run:
            workflow:
              namespace: convoke
              name: double
              version: '1.0.0'
              input:
                n: ${ .quantity }
      - total:
          set:
            total: ${ .doubled + 1 }
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: double
      version: '1.0.0'
    do:
      - twice:
          set:
            doubled: ${ .n * 2 }
    """
    And given the workflow input is:
    """yaml
    quantity: 3
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    total: 7
    """
    And the child instance of price should be completed
    And there should be exactly one child instance, bound by price

  Scenario: Child Fault Caught By Try
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: careful
      version: '1.0.0'
    do:
      - guarded:
          try:
            - check:
                run:
                  workflow:
                    namespace: convoke
                    name: refuse
                    version: '1.0.0'
          catch:
            errors:
              with:
                type: https://convoke.dev/errors/test/refused
                status: 418
            as: failure
            do:
              - note:
                  set:
                    caught: ${ $failure.status }
                    title: ${ $failure.title }
                    at: ${ $failure.instance }
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: refuse
      version: '1.0.0'
    do:
      - no:
          raise:
            error:
              type: https://convoke.dev/errors/test/refused
              status: 418
              title: Refused
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    caught: 418
    title: Refused
    at: /do/0/guarded/try/0/check
    """
    And the child instance of check should be faulted

  Scenario: Uncaught Child Fault Faults The Parent With The Child's Error
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: careless
      version: '1.0.0'
    do:
      - check:
          run:
            workflow:
              namespace: convoke
              name: refuse
              version: '1.0.0'
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: refuse
      version: '1.0.0'
    do:
      - no:
          raise:
            error:
              type: https://convoke.dev/errors/test/refused
              status: 418
    """
    When the workflow is executed
    Then the workflow should fault with error:
    """yaml
    type: https://convoke.dev/errors/test/refused
    status: 418
    instance: /do/0/check
    """

  Scenario: Worker Stops Between Binding The Child And Starting It
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: resilient
      version: '1.0.0'
    do:
      - delegate:
          run:
            workflow:
              namespace: convoke
              name: slow
              version: '1.0.0'
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: slow
      version: '1.0.0'
    do:
      - pause:
          wait:
            milliseconds: 200
      - done:
          set:
            done: true
    """
    When the worker stops after delegate bound its child, before the child started
    Then the workflow should complete with output:
    """yaml
    done: true
    """
    And there should be exactly one child instance, bound by delegate
    And the child instance of delegate should be completed

  Scenario: Worker Reloaded While The Child Runs
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: resilient-later
      version: '1.0.0'
    do:
      - delegate:
          run:
            workflow:
              namespace: convoke
              name: slow
              version: '1.0.0'
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: slow
      version: '1.0.0'
    do:
      - pause:
          wait:
            milliseconds: 500
      - done:
          set:
            done: true
    """
    When the workflow is started and delegate has started its child
    And the worker is reloaded
    Then the workflow should complete with output:
    """yaml
    done: true
    """
    And there should be exactly one child instance, bound by delegate
    And the child instance of delegate should be completed

  Scenario: Cancelling The Parent Cancels Its Running Child
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: abandoned
      version: '1.0.0'
    do:
      - delegate:
          run:
            workflow:
              namespace: convoke
              name: forever
              version: '1.0.0'
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: forever
      version: '1.0.0'
    do:
      - pause:
          wait:
            hours: 1
    """
    When the workflow is started and delegate has started its child
    And the workflow is cancelled
    Then the workflow should be cancelled
    And the child instance of delegate should be cancelled
    And the child instance of delegate should be released as cancelled by the workflow

  Scenario: Not Awaited Child Runs On
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: fire-and-forget
      version: '1.0.0'
    do:
      - delegate:
          run:
            workflow:
              namespace: convoke
              name: slow
              version: '1.0.0'
            await: false
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: slow
      version: '1.0.0'
    do:
      - pause:
          wait:
            milliseconds: 300
    """
    And given the workflow input is:
    """yaml
    order: 7
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    order: 7
    """
    And the child instance of delegate should be completed

  Scenario: A Workflow Running Itself Is Bounded In Depth
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: recurse
      version: '1.0.0'
    do:
      - deeper:
          if: ${ .n < .limit }
          run:
            workflow:
              namespace: convoke
              name: recurse
              version: '1.0.0'
              input:
                n: ${ .n + 1 }
                limit: ${ .limit }
    """
    And given the workflow input is:
    """yaml
    n: 0
    limit: 20
    """
    When the workflow is executed
    Then the workflow should fault with error:
    """yaml
    type: https://serverlessworkflow.io/spec/1.0.0/errors/runtime
    title: Workflow nesting too deep
    instance: /do/0/deeper
    """
    And the workflow instances should number 9

  Scenario: A Workflow Running Itself Within The Bound Completes
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: recurse-shallow
      version: '1.0.0'
    do:
      - deeper:
          if: ${ .n < .limit }
          run:
            workflow:
              namespace: convoke
              name: recurse-shallow
              version: '1.0.0'
              input:
                n: ${ .n + 1 }
                limit: ${ .limit }
    """
    And given the workflow input is:
    """yaml
    n: 0
    limit: 3
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    n: 3
    limit: 3
    """
    And the workflow instances should number 4

  Scenario: A Reference To A Workflow Not Pinned Beside It Is Refused
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: lost
      version: '1.0.0'
    do:
      - delegate:
          run:
            workflow:
              namespace: convoke
              name: nowhere
              version: '1.0.0'
    """
    Then starting the workflow should be refused as unsupported naming /do/0/delegate/run/workflow
    And the workflow instances should number 0

  Scenario: A Parent Faulted By Its Timeout Cancels Its Running Child
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: impatient
      version: '1.0.0'
    timeout:
      after:
        milliseconds: 300
    do:
      - delegate:
          run:
            workflow:
              namespace: convoke
              name: forever
              version: '1.0.0'
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: forever
      version: '1.0.0'
    do:
      - pause:
          wait:
            hours: 1
    """
    When the workflow is executed
    Then the workflow should fault with status 408
    And the child instance of delegate should be cancelled
    And the child instance of delegate should be released as cancelled by the workflow

  Scenario: A Task Timeout Cancels The Child It Awaited
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: hurried
      version: '1.0.0'
    do:
      - guarded:
          try:
            - delegate:
                timeout:
                  after:
                    milliseconds: 300
                run:
                  workflow:
                    namespace: convoke
                    name: forever
                    version: '1.0.0'
          catch:
            errors:
              with:
                type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout
            do:
              - fallback:
                  set:
                    fallback: true
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: forever
      version: '1.0.0'
    do:
      - pause:
          wait:
            hours: 1
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    fallback: true
    """
    And the child instance of delegate should be cancelled
    And the child instance of delegate should be released as cancelled by delegate

  Scenario: A Competing Fork's Losing Branch Cancels The Child It Awaited
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: racing
      version: '1.0.0'
    do:
      - race:
          fork:
            compete: true
            branches:
              - quick:
                  do:
                    - pause:
                        wait:
                          milliseconds: 300
                    - answer:
                        set:
                          winner: quick
              - delegate:
                  run:
                    workflow:
                      namespace: convoke
                      name: forever
                      version: '1.0.0'
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: forever
      version: '1.0.0'
    do:
      - pause:
          wait:
            hours: 1
    """
    When the workflow is executed
    Then the workflow should complete with output:
    """yaml
    winner: quick
    """
    And the child instance of delegate should be cancelled
    And the child instance of delegate should be released as cancelled by race

  Scenario: Worker Stops Between An Enclosing Timeout And The Child's Cancel
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: hurried-outer
      version: '1.0.0'
    do:
      - guarded:
          try:
            - outer:
                timeout:
                  after:
                    milliseconds: 300
                do:
                  - delegate:
                      run:
                        workflow:
                          namespace: convoke
                          name: forever
                          version: '1.0.0'
          catch:
            errors:
              with:
                type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout
            do:
              - fallback:
                  set:
                    fallback: true
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: forever
      version: '1.0.0'
    do:
      - pause:
          wait:
            hours: 1
    """
    When the worker stops after outer timed out, before the child of delegate was cancelled
    Then the workflow should complete with output:
    """yaml
    fallback: true
    """
    And there should be exactly one child instance, bound by delegate
    And the child instance of delegate should be cancelled
    And the child instance of delegate should be released as cancelled by outer

  Scenario: A Child Not Awaited Runs On After Its Task Timed Out, And Is Cancelled With Its Parent
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: fire-and-wait
      version: '1.0.0'
    do:
      - guarded:
          try:
            - outer:
                timeout:
                  after:
                    milliseconds: 300
                do:
                  - delegate:
                      run:
                        workflow:
                          namespace: convoke
                          name: forever
                          version: '1.0.0'
                        await: false
                  - linger:
                      wait:
                        hours: 1
          catch:
            errors:
              with:
                type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout
            do:
              - hold:
                  wait:
                    hours: 1
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: forever
      version: '1.0.0'
    do:
      - pause:
          wait:
            hours: 1
    """
    When the workflow is started and delegate has started its child
    And the workflow is waiting in hold
    Then the child instance of delegate should be running
    And the workflow is cancelled
    Then the workflow should be cancelled
    And the child instance of delegate should be cancelled
    And the child instance of delegate should be released as cancelled by the workflow

  Scenario: Worker Stops After The Parent Faulted, Before Its Abandoned Child Was Cancelled
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: hurried-then-late
      version: '1.0.0'
    timeout:
      after:
        milliseconds: 900
    do:
      - outer:
          timeout:
            after:
              milliseconds: 300
          do:
            - delegate:
                run:
                  workflow:
                    namespace: convoke
                    name: forever
                    version: '1.0.0'
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: forever
      version: '1.0.0'
    do:
      - pause:
          wait:
            hours: 1
    """
    When the worker stops after the workflow ended, before the child of delegate was cancelled
    Then the next worker cancels the abandoned child and records it in the ended parent's log
    And the workflow should fault with status 408
    And there should be exactly one child instance, bound by delegate
    And the child instance of delegate should be cancelled
    And the child instance of delegate should be released as cancelled by outer

  Scenario: Worker Stops After The Parent Was Cancelled, Before Its Abandoned Child Was Cancelled
    Given a workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: hurried-then-cancelled
      version: '1.0.0'
    do:
      - outer:
          timeout:
            after:
              milliseconds: 300
          do:
            - delegate:
                run:
                  workflow:
                    namespace: convoke
                    name: forever
                    version: '1.0.0'
    """
    And a child workflow with definition:
    """yaml
    document:
      dsl: '1.0.3'
      namespace: convoke
      name: forever
      version: '1.0.0'
    do:
      - pause:
          wait:
            hours: 1
    """
    When the worker stops after outer timed out and the workflow was cancelled, before the child of delegate was cancelled
    Then the next worker cancels the abandoned child and records it in the ended parent's log
    And the workflow should be cancelled
    And there should be exactly one child instance, bound by delegate
    And the child instance of delegate should be cancelled
    And the child instance of delegate should be released as cancelled by outer
