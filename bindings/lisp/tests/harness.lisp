;;;; harness.lisp - a minimal test harness (no dependency beyond ASDF/UIOP).

(defpackage #:knn-gpgpu-tests
  (:use #:cl)
  (:export #:run-all))

(in-package #:knn-gpgpu-tests)

(defvar *tests* '() "Registered tests, in definition order (reversed).")
(defvar *failures* 0)
(defvar *checks* 0)
(defvar *current* nil)

(defmacro deftest (name &body body)
  `(progn
     (defun ,name () ,@body)
     (setf *tests* (cons ',name (remove ',name *tests*)))
     ',name))

(defun fail (format-control &rest args)
  (incf *failures*)
  (format t "~&  FAIL in ~A: ~?~%" *current* format-control args))

(defmacro check (form &optional description)
  `(progn
     (incf *checks*)
     (unless ,form
       (fail "~A" ,(or description (let ((*print-length* 8) (*print-level* 4))
                                     (format nil "~S" form)))))))

(defmacro check-signals (condition-type form &optional description)
  "Check that FORM signals CONDITION-TYPE; return the condition."
  (let ((c (gensym)))
    `(let ((,c (handler-case (progn ,form nil)
                 (,condition-type (e) e)
                 (error (e) (fail "~A signalled ~S (~A), expected ~S"
                                  ,(or description (format nil "~S" form))
                                  (type-of e) e ',condition-type)
                   :wrong))))
       (incf *checks*)
       (cond ((null ,c) (fail "~A signalled nothing, expected ~S"
                              ,(or description (format nil "~S" form)) ',condition-type)
                        nil)
             ((eq ,c :wrong) nil)
             (t ,c)))))

(defun run-all ()
  "Run every test; print a summary; return T when all passed."
  (let ((*failures* 0) (*checks* 0) (errors 0)
        (start (get-internal-real-time)))
    (dolist (name (reverse *tests*))
      (let ((*current* name)
            (before *failures*))
        (handler-case (funcall name)
          (error (e)
            (incf errors)
            (incf *failures*)
            (format t "~&  ERROR in ~A: ~A~%" name e)))
        (format t "~&~:[FAIL~;ok  ~] ~(~A~)~%" (= before *failures*) name)))
    (format t "~&~D tests, ~D checks, ~D failures (~D errors) in ~,2Fs~%"
            (length *tests*) *checks* *failures* errors
            (/ (- (get-internal-real-time) start) internal-time-units-per-second))
    (finish-output)
    (zerop *failures*)))
